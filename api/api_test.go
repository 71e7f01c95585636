package api

import "testing"

func TestWorkflowIDRoundTrip(t *testing.T) {
	id := WorkflowID("o-1")
	if id != "order:o-1" {
		t.Fatalf("WorkflowID = %q, want order:o-1", id)
	}
	if got, ok := OrderIDFromWorkflowID(id); !ok || got != "o-1" {
		t.Errorf("OrderIDFromWorkflowID(%q) = %q, %v", id, got, ok)
	}
	for _, bad := range []string{"order:", "o-1", "orders:o-1"} {
		if got, ok := OrderIDFromWorkflowID(bad); ok {
			t.Errorf("OrderIDFromWorkflowID(%q) = %q, true; not an order workflow ID", bad, got)
		}
	}
}
