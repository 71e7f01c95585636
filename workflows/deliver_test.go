package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

func testEvent(orderID string, v int64, s fsm.Status) fsm.Event {
	return fsm.Event{EventID: orderID + "-" + string(s), OrderID: orderID, UserID: 7, Status: s,
		Version: v, AmountCents: 12345, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(v) * time.Minute)}
}

func TestStartOptions(t *testing.T) {
	o := StartOptions("q1", "A-1")
	if o.ID != "order:A-1" || o.TaskQueue != "q1" ||
		o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		t.Errorf("StartOptions = %+v", o)
	}
}

func TestDeliverSignalsWithStart(t *testing.T) {
	c := &mocks.Client{}
	e := testEvent("A-1", 2, fsm.Paid)
	params := Params{GracePeriod: time.Second}
	src := &wire.Envelope{Topic: "T", MessageID: "M1", Keys: "A-1", Tags: "PAID", Body: []byte("{}")}
	c.On("SignalWithStartWorkflow", mock.Anything, "order:A-1", api.SignalEvent, Delivery{Event: e, Source: src},
		StartOptions("q1", "A-1"), api.WorkflowType, Input{Params: params}).Return(nil, nil).Once()
	if err := Deliver(context.Background(), c, "q1", params, e, src); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	c.AssertExpectations(t)
}

// TestStartStatus: the status a new order has after the events, as the
// lifecycle below was built, when they hold its first version; none
// otherwise.
func TestStartStatus(t *testing.T) {
	created, paid, shipped := testEvent("A-1", 1, fsm.Created), testEvent("A-1", 2, fsm.Paid), testEvent("A-1", 3, fsm.Shipped)
	changed := created
	changed.AmountCents++ // version 1 again, other content: a conflict
	for _, c := range []struct {
		name   string
		events []fsm.Event
		want   fsm.Status
	}{
		{"the first version", []fsm.Event{created}, fsm.Created},
		{"a batch from the first version", []fsm.Event{created, paid, shipped}, fsm.Shipped},
		{"a reordered batch: version 1 after 3 is stale", []fsm.Event{shipped, created}, fsm.Shipped},
		{"a conflict changes nothing", []fsm.Event{created, changed}, fsm.Created},
		{"no first version", []fsm.Event{paid, shipped}, ""},
		{"nothing", nil, ""},
	} {
		if got := StartStatus(c.events...); got != c.want {
			t.Errorf("%s: StartStatus = %q, want %q", c.name, got, c.want)
		}
	}
}

// Deliver names the status of a new order's first version as the search
// attribute a run it starts begins with.
func TestDeliverNamesTheStartStatus(t *testing.T) {
	c := &mocks.Client{}
	e := testEvent("A-1", 1, fsm.Created)
	want := StartOptions("q1", "A-1")
	want.TypedSearchAttributes = temporal.NewSearchAttributes(api.OrderStatusKey.ValueSet("CREATED"))
	c.On("SignalWithStartWorkflow", mock.Anything, "order:A-1", api.SignalEvent, Delivery{Event: e},
		want, api.WorkflowType, Input{Params: DefaultParams()}).Return(nil, nil).Once()
	if err := Deliver(context.Background(), c, "q1", DefaultParams(), e, nil); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	c.AssertExpectations(t)
}

func TestDeliverWrapsClientError(t *testing.T) {
	c := &mocks.Client{}
	boom := errors.New("frontend unavailable")
	c.On("SignalWithStartWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything,
		mock.Anything, mock.Anything, mock.Anything).Return(nil, boom)
	err := Deliver(context.Background(), c, "q1", DefaultParams(), testEvent("A-1", 1, fsm.Created), nil)
	if !errors.Is(err, boom) || !errors.Is(err, ErrDeliver) {
		t.Fatalf("Deliver error = %v, want it to wrap the client error and ErrDeliver", err)
	}
}

func TestDeliverRefusesEmptyTaskQueue(t *testing.T) {
	c := &mocks.Client{} // any call would panic: nothing is expected
	if err := Deliver(context.Background(), c, "", DefaultParams(), testEvent("A-1", 1, fsm.Created), nil); err == nil {
		t.Fatal("Deliver with an empty task queue succeeded")
	}
}

// A batch signal is no larger than the sum of its deliveries' sizes, each
// measured alone: the bridge's budget adds those up. The figure also
// matches the encoding by hand: the JSON of the value plus the payload's
// metadata ("encoding": "json/plain") and its protobuf framing.
func TestEncodedSize(t *testing.T) {
	body := []byte(`{"order_id":"A-1"}`)
	var ds []Delivery
	sum := 0
	for v := int64(1); v <= 5; v++ {
		src := &wire.Envelope{Topic: "T", MessageID: "M", Keys: "A-1", Tags: "PAID", Body: body}
		d := Delivery{Event: testEvent("A-1", v, fsm.Paid), Source: src}
		n, err := EncodedSize(d)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		sum += n
	}
	n, err := EncodedSize(Batch{Deliveries: ds})
	if err != nil {
		t.Fatal(err)
	}
	if n > sum {
		t.Errorf("a batch of 5 encodes to %d bytes, more than its deliveries alone (%d)", n, sum)
	}
	// "x" as JSON is 3 bytes. The payload: its metadata entry, key
	// "encoding" (8) and value "json/plain" (10) each with a tag and a
	// length byte (22), the entry framed (24); its data framed (5): 29.
	// The payloads hold it framed: 31.
	if n, err := EncodedSize("x"); err != nil || n != 31 {
		t.Errorf(`EncodedSize("x") = %d, %v; want 31`, n, err)
	}
	if _, err := EncodedSize(make(chan int)); err == nil {
		t.Error("EncodedSize of a channel succeeded, want the converter's error")
	}
}
