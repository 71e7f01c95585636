package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// settle waits until the run exp describes settles, with every invariant
// holding twice 6 s apart (at most 3 minutes), and returns the checker's
// report; it fails the test with the report when the run does not settle.
func settle(ctx context.Context, t *testing.T, db *gorm.DB, exp *scenario.Expected, what string) string {
	t.Helper()
	r, err := check.WaitSettled(ctx, db, exp, check.WaitOptions{Wait: 3 * time.Minute, Interval: 2 * time.Second, Settle: 6 * time.Second})
	var out bytes.Buffer
	if r != nil {
		r.Write(&out)
	}
	if err != nil {
		t.Fatalf("%s: run %s: %v\n%s", what, exp.Prefix, err, out.String())
	}
	return out.String()
}

// newProducer is a producer of its own on the name servers, over TLS when
// tlsConf is not nil, closed when the test ends.
func newProducer(t *testing.T, namesrv, name string, tlsConf *tls.Config) *mq.Producer {
	t.Helper()
	opts := []mq.ProducerOption{mq.WithProducerGroup(uniq.Name(name + "-producer"))}
	if tlsConf != nil {
		opts = append(opts, mq.WithTLS(tlsConf))
	}
	p, err := mq.NewProducer(namesrv, opts...)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
