package kvhints

import (
	"errors"
	"strings"
	"testing"
)

func TestFetchActionEncodesReference(t *testing.T) {
	a, err := NewFetchAction("a1", "tcp://127.0.0.1:23280", []uint64{11, 22})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnvelope("msg-123", []Action{a})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Encode()
	if err != nil || string(b) != refEnvelope {
		t.Fatalf("Encode = %s, %v", b, err)
	}
	s, err := e.Snapshot(Limits{})
	if err != nil || string(s.b) != refEnvelope {
		t.Fatalf("Snapshot = %v, %v", s, err)
	}
}

func TestConstructorsReportWhatIsWrong(t *testing.T) {
	ok, _ := NewFetchAction("a", "tcp://h:1", nil)
	extra, _ := NewMember("trace", []byte(`{"id": 1}`))
	cases := []struct {
		name   string
		build  func() error
		reason Reason
		detail string
	}{
		{"empty message_id", func() error { _, err := NewEnvelope("", nil); return err }, ReasonMalformed, "message_id"},
		{"bad utf8 id", func() error { _, err := NewAction("\xff", "t", "v", []byte(`{}`)); return err }, ReasonMalformed, "action_id"},
		{"empty type", func() error { _, err := NewAction("a", "", "v", []byte(`{}`)); return err }, ReasonMalformed, "action_type"},
		{"payload not object", func() error { _, err := NewAction("a", "t", "v", []byte(`[1]`)); return err }, ReasonMalformed, "payload"},
		{"payload not json", func() error { _, err := NewAction("a", "t", "v", []byte(`{`)); return err }, ReasonMalformed, "payload"},
		{"payload NaN", func() error { _, err := NewAction("a", "t", "v", []byte(`{"x":NaN}`)); return err }, ReasonMalformed, "payload"},
		{"payload big int", func() error { _, err := NewAction("a", "t", "v", []byte(`{"x":18446744073709551616}`)); return err }, ReasonMalformed, "payload"},
		{"empty endpoint", func() error { _, err := NewFetchAction("a", "", nil); return err }, ReasonMalformed, "source_control_endpoint"},
		{"reserved extra", func() error {
			m, _ := NewMember("message_id", []byte(`1`))
			_, err := NewEnvelope("m", nil, m)
			return err
		}, ReasonMalformed, "message_id"},
		{"repeated extra", func() error { _, err := NewEnvelope("m", []Action{ok}, extra, extra); return err }, ReasonMalformed, "twice"},
		{"too many hashes", func() error {
			a, err := NewFetchAction("a", "tcp://h:1", make([]uint64, 40000))
			if err != nil {
				return err
			}
			_, err = NewEnvelope("m", []Action{a})
			return err
		}, ReasonOversized, ""},
		{"wrong version", func() error { _, err := (&Envelope{ProtocolVersion: "0.2", MessageID: "m"}).Encode(); return err }, ReasonUnknownVersion, ""},
	}
	for _, c := range cases {
		err := c.build()
		var ae *AdmitError
		if !errors.As(err, &ae) || ae.Reason != c.reason || !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestExtraMembersRoundTrip(t *testing.T) {
	m, err := NewMember("trace", []byte(" { \"id\" : [1, 2] } "))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewAction("a", "kv.other", "9", []byte(`{"k":"v"}`), Member{Name: "note", Value: []byte(`"n"`)})
	e, err := NewEnvelope("m", []Action{a}, m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.Encode()
	want := `{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"kv.other","action_version":"9","payload":{"k":"v"},"note":"n"}],"trace":{"id":[1,2]}}`
	if string(b) != want {
		t.Fatalf("%s", b)
	}
	s, _ := Admit(b, Limits{})
	d, _ := s.Decode()
	b2, err := d.Encode()
	if err != nil || string(b2) != want {
		t.Fatalf("decode+encode = %s, %v", b2, err)
	}
}
