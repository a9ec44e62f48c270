package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logSink batches log lines on their way to w (stderr), the way Envoy's
// file access log does: a line is written when the buffer holds
// logSinkSize bytes, when the flush interval passes, when a warning or an
// error is logged (flushOnWarn), and on Close. Without it every request
// costs a write system call for its access log line.
type logSink struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// logSinkSize is the buffer size that triggers a write.
const logSinkSize = 32 << 10

// newLogSink buffers lines for w and writes them at least every interval;
// an interval of 0 or less writes each line at once.
func newLogSink(w io.Writer, interval time.Duration) *logSink {
	s := &logSink{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	if interval <= 0 {
		close(s.done)
		return s
	}
	s.buf = make([]byte, 0, logSinkSize+4<<10)
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.Flush()
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

// Write takes one log line (slog handlers write each record at once).
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || cap(s.buf) == 0 {
		return s.w.Write(p)
	}
	s.buf = append(s.buf, p...)
	if len(s.buf) >= logSinkSize {
		s.flushLocked()
	}
	return len(p), nil
}

// Flush writes what is buffered.
func (s *logSink) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *logSink) flushLocked() {
	if len(s.buf) > 0 {
		_, _ = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
}

// Close flushes, stops the timer and makes later lines go straight to w.
func (s *logSink) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.flushLocked()
	s.mu.Unlock()
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
}

// flushOnWarn is a handler that flushes its sink after every record at
// warning level or above, so that trouble is never held back.
type flushOnWarn struct {
	slog.Handler
	sink *logSink
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.sink.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(as []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(as), h.sink}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.sink}
}
