package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReplayDeniesABurstOverTheLimit(t *testing.T) {
	in := strings.NewReader("0 alice\n10 alice\n20 alice\n30 bob\n1500 alice\n")
	var out bytes.Buffer
	denied, err := replay(in, &out, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "0 alice allow\n10 alice allow\n20 alice deny\n30 bob allow\n1500 alice allow\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if denied != 1 {
		t.Fatalf("denied = %d, want 1", denied)
	}
}

func TestReplayRejectsMalformedLines(t *testing.T) {
	if _, err := replay(strings.NewReader("soon alice\n"), &bytes.Buffer{}, 1, 1); err == nil {
		t.Fatal("a line without a timestamp was accepted")
	}
}
