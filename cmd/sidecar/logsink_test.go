package main

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

func TestLogSink(t *testing.T) {
	t.Run("info waits, warning flushes", func(t *testing.T) {
		var out syncbuf.Buffer
		sink := newLogSink(&out, time.Hour)
		defer sink.Close()
		log := slog.New(flushOnWarn{slog.NewJSONHandler(sink, nil), sink})
		log.Info("request", "path", "/a")
		if out.String() != "" {
			t.Fatalf("an info line was written before a flush: %q", out.String())
		}
		log.Warn("upstream error")
		got := out.String()
		if !strings.Contains(got, `"msg":"request"`) || !strings.Contains(got, `"msg":"upstream error"`) ||
			strings.Index(got, "request") > strings.Index(got, "upstream error") {
			t.Fatalf("after a warning, want both lines in order, got %q", got)
		}
		if out.Writes() != 1 {
			t.Errorf("%d writes, want 1", out.Writes())
		}
	})
	t.Run("interval", func(t *testing.T) {
		var out syncbuf.Buffer
		sink := newLogSink(&out, 20*time.Millisecond)
		defer sink.Close()
		slog.New(slog.NewJSONHandler(sink, nil)).Info("request")
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), `"msg":"request"`) {
			if time.Now().After(deadline) {
				t.Fatal("the line was not written within 5s of a 20ms interval")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("size and close", func(t *testing.T) {
		var out syncbuf.Buffer
		sink := newLogSink(&out, time.Hour)
		log := slog.New(slog.NewJSONHandler(sink, nil))
		line := strings.Repeat("x", 1000)
		n := 0
		for out.Writes() == 0 {
			log.Info(line)
			n++
			if n > 2*logSinkSize/1000 {
				t.Fatal("the buffer was never written")
			}
		}
		log.Info("last")
		sink.Close()
		if got := strings.Count(out.String(), "\n"); got != n+1 {
			t.Errorf("%d lines after Close, want %d", got, n+1)
		}
		log.Info("after close")
		if !strings.Contains(out.String(), "after close") {
			t.Error("a line logged after Close was lost")
		}
		sink.Close() // twice is fine
	})
	t.Run("unbuffered", func(t *testing.T) {
		var out syncbuf.Buffer
		sink := newLogSink(&out, 0)
		defer sink.Close()
		slog.New(slog.NewJSONHandler(sink, nil)).Info("request")
		if !strings.Contains(out.String(), "request") {
			t.Fatal("with interval 0 a line must be written at once")
		}
	})
	t.Run("concurrent lines stay whole", func(t *testing.T) {
		var out syncbuf.Buffer
		sink := newLogSink(&out, time.Millisecond)
		log := slog.New(slog.NewJSONHandler(sink, nil))
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 500 {
					log.Info("request", "id", fmt.Sprintf("%d-%d", g, i))
				}
			}()
		}
		wg.Wait()
		sink.Close()
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 4000 {
			t.Fatalf("%d lines, want 4000", len(lines))
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "{") || !strings.HasSuffix(l, "}") {
				t.Fatalf("torn line %q", l)
			}
		}
	})
}
