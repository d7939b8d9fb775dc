package hub_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/hub"
)

func TestBar(t *testing.T) {
	var b bytes.Buffer
	bar := hub.NewBar(&b, "org/x")
	bar.Begin("a", 2e6, 0)
	bar.Begin("b", 1e6, 5e5)
	time.Sleep(600 * time.Millisecond) // long enough for a rate
	bar.Bytes(2e6)
	bar.End(hub.FileResult{Name: "a"}, nil)
	bar.Bytes(5e5)
	bar.End(hub.FileResult{Name: "b"}, nil)
	bar.Finish()
	out := b.String()
	last := out[strings.LastIndex(out, "\r")+1:]
	if !strings.HasPrefix(last, "pulling org/x: 3.0 MB / 3.0 MB (100%), ") || !strings.Contains(last, "MB/s") || !strings.HasSuffix(last, ", 2/2 files\x1b[K\n") {
		t.Fatalf("last line %q", last)
	}
}

func TestLines(t *testing.T) {
	var b bytes.Buffer
	l := hub.NewLines(&b, "org/x")
	l.Begin("a", 100, 0)
	l.End(hub.FileResult{Name: "a", Size: 2e6, Status: "downloaded", Downloaded: 2e6}, nil)
	l.End(hub.FileResult{Name: "b", Size: 10, Status: "cached"}, nil)
	l.End(hub.FileResult{Name: "c", Size: 3e6, Status: "resumed", Downloaded: 1e6}, nil)
	l.End(hub.FileResult{Name: "d"}, errors.New("x"))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "mlxgo: org/x: a 2.0 MB (") || lines[1] != "mlxgo: org/x: b 10 B (cached)" ||
		lines[2] != "mlxgo: org/x: c 3.0 MB (resumed: 1.0 MB fetched)" {
		t.Fatalf("lines %q", lines)
	}
}
