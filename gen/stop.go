package gen

import "strings"

// StopMatcher holds streamed text back until it cannot be the start of a stop
// string, so that a stop string split across chunks is never emitted, even in
// part. Generation ends at the first stop string to complete; the text
// before it is emitted in full.
type StopMatcher struct {
	stops   []string
	pending string
	stopped bool
	matched string
}

// NewStopMatcher matches the given stop strings; empty ones are ignored.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	return m
}

// Active reports whether there is any stop string to look for.
func (m *StopMatcher) Active() bool { return len(m.stops) > 0 }

// Push adds a chunk of generated text. It returns the text that is now safe
// to emit, and stop = true when a stop string has appeared: out is then the
// text before it, and everything after is dropped. After a stop, Push
// returns nothing.
func (m *StopMatcher) Push(chunk string) (out string, stop bool) {
	if m.stopped {
		return "", true
	}
	if len(m.stops) == 0 {
		return chunk, false
	}
	m.pending += chunk
	// Generation stops where the first stop string is complete: the smallest
	// end position, and on a tie the longest match. That does not depend on
	// how the text was split into chunks.
	cut, end := -1, 0
	for _, s := range m.stops {
		i := strings.Index(m.pending, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); cut < 0 || e < end || (e == end && i < cut) {
			cut, end = i, e
		}
	}
	if cut >= 0 {
		out = m.pending[:cut]
		m.matched = m.pending[cut:end]
		m.pending, m.stopped = "", true
		return out, true
	}
	hold := m.heldBack()
	out = m.pending[:len(m.pending)-hold]
	m.pending = m.pending[len(m.pending)-hold:]
	return out, false
}

// heldBack is the length of the longest suffix of pending that is a proper
// prefix of some stop string: text that a later chunk may turn into a stop.
func (m *StopMatcher) heldBack() int {
	best := 0
	for _, s := range m.stops {
		n := min(len(s)-1, len(m.pending))
		for k := n; k > best; k-- {
			if strings.HasSuffix(m.pending, s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// Flush returns the held-back text once generation has ended without a stop.
func (m *StopMatcher) Flush() string {
	if m.stopped {
		return ""
	}
	out := m.pending
	m.pending = ""
	return out
}

// Stopped reports whether a stop string has been seen.
func (m *StopMatcher) Stopped() bool { return m.stopped }

// Matched is the stop string that ended generation ("" before a stop).
func (m *StopMatcher) Matched() string { return m.matched }
