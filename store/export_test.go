package store

// QueuedSeqs is how many numbers wait in r for a commit to start.
func QueuedSeqs(r *SeqRecorder) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}
