package hub

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Bar draws one self-overwriting line on a terminal: bytes, rate, time left.
type Bar struct {
	mu          sync.Mutex
	w           io.Writer
	label       string
	total, have int64 // bytes wanted, bytes on disk
	fetched     int64 // bytes received by this pull
	files, done int
	start, last time.Time
	drawn       bool
}

// NewBar draws onto w (a terminal) for the pull of label.
func NewBar(w io.Writer, label string) *Bar {
	return &Bar{w: w, label: label, start: time.Now()}
}

func (b *Bar) Begin(name string, size, have int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += size
	b.have += have
	b.files++
	b.draw(false)
}

func (b *Bar) Bytes(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.have += n
	b.fetched += n
	b.draw(false)
}

func (b *Bar) End(r FileResult, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.done++
	}
	b.draw(true)
}

// Finish ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		b.draw(true)
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}

func (b *Bar) draw(force bool) {
	now := time.Now()
	if !force && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last, b.drawn = now, true
	pct := int64(100)
	if b.total > 0 {
		pct = b.have * 100 / b.total
	}
	line := fmt.Sprintf("pulling %s: %s / %s (%d%%)", b.label, Bytes(b.have), Bytes(b.total), pct)
	if el := now.Sub(b.start).Seconds(); el > 0.5 && b.fetched > 0 {
		rate := float64(b.fetched) / el
		line += fmt.Sprintf(", %s/s", Bytes(int64(rate)))
		if left := b.total - b.have; left > 0 {
			line += ", " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String() + " left"
		}
	}
	line += fmt.Sprintf(", %d/%d files", b.done, b.files)
	fmt.Fprintf(b.w, "\r%s\x1b[K", line)
}

// Lines writes one line per finished file, for logs and pipes.
type Lines struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	start map[string]time.Time
}

// NewLines writes to w for the pull of label.
func NewLines(w io.Writer, label string) *Lines {
	return &Lines{w: w, label: label, start: map[string]time.Time{}}
}

func (l *Lines) Begin(name string, size, have int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start[name] = time.Now()
}

func (l *Lines) Bytes(int64) {}

func (l *Lines) End(r FileResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return // the pull's error says it
	}
	msg := fmt.Sprintf("mlxgo: %s: %s %s", l.label, r.Name, Bytes(r.Size))
	switch r.Status {
	case "cached":
		msg += " (cached)"
	case "resumed":
		msg += fmt.Sprintf(" (resumed: %s fetched)", Bytes(r.Downloaded))
	default:
		if el := time.Since(l.start[r.Name]).Seconds(); el > 0 {
			msg += fmt.Sprintf(" (%s/s)", Bytes(int64(float64(r.Downloaded)/el)))
		}
	}
	fmt.Fprintln(l.w, msg)
}

// Bytes formats a byte count in decimal units, as the hub shows sizes.
func Bytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
