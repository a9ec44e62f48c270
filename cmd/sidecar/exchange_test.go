package main

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The exchange carries the address the request came in on, as its
// connection formatted it once at accept, for every request on a
// kept-alive connection; a request net/http gave no address gets "".
func TestExchangeLocalAddr(t *testing.T) {
	s := &server{reg: prometheus.NewRegistry()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- s.newExchange(w, r).localAddr
	})}
	go func() { _ = srv.Serve(s.limitConnections(ln, 4)) }()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	for i := 0; i < 2; i++ {
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if a := <-got; a != ln.Addr().String() {
			t.Errorf("request %d: local address %q, want %q", i, a, ln.Addr().String())
		}
	}
	r, _ := http.NewRequest("GET", "http://x/", nil)
	if a := s.newExchange(nil, r).localAddr; a != "" {
		t.Errorf("no connection: local address %q", a)
	}
}
