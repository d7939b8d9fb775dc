package server

import (
	"container/list"
	"sync"
)

// responseStore keeps the latest responses for previous_response_id and
// GET /v1/responses/{id}: an LRU bounded by count (--response-store), in
// process memory only, so a restart forgets every response. Each entry
// holds its whole conversation, so a chain survives its older links
// being dropped.
type responseStore struct {
	mu    sync.Mutex
	max   int // 0: nothing is kept
	order *list.List
	byID  map[string]*list.Element
}

type storedResponse struct {
	id    string
	convo []chatMessage  // the input so far and this response's output, without instructions
	body  map[string]any // the response object as it was answered
}

func newResponseStore(max int) *responseStore {
	return &responseStore{max: max, order: list.New(), byID: map[string]*list.Element{}}
}

func (s *responseStore) put(id string, r storedResponse) {
	if s.max <= 0 {
		return
	}
	r.id = id
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.Remove(e)
	}
	s.byID[id] = s.order.PushFront(r)
	for s.order.Len() > s.max {
		old := s.order.Remove(s.order.Back()).(storedResponse)
		delete(s.byID, old.id)
	}
}

// get returns a stored response and marks it most recently used.
func (s *responseStore) get(id string) (storedResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return storedResponse{}, false
	}
	s.order.MoveToFront(e)
	return e.Value.(storedResponse), true
}

func (s *responseStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
