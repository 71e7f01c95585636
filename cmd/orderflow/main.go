// Command orderflow is the operator command of orderflow:
//
//	orderflow publish [flags]   publish a scenario of order events and write its expected final state
//	orderflow publish -late F   publish the late phase of the run whose expected-state file is F
//	orderflow check [flags]     wait until a published scenario settles and check the five invariants
//	orderflow dlq list [flags]  the parked messages (-summary: counts by reason)
//	orderflow dlq show ID       one parked message as received (control characters escaped; -json: exact)
//	orderflow dlq replay        re-deliver parked messages that are valid events (-dry-run: only say what it would do)
//	orderflow audit [flags]     check the invariants on the live tables
//	orderflow why ORDER_ID [V]  everything known about one order, and why each event was decided so
//	orderflow prune [flags]     remove the order_events rows and dead letters of orders terminal for longer than -older-than (-yes; without it a dry run)
//	orderflow migrate [flags]   apply the pending schema migrations, then exit
//	orderflow gaps [flags]      holes in the producers' sequences: suspected lost messages
//	orderflow lag [flags]       the consumer group's backlog on the broker, per queue (-json for scripts)
//	orderflow recover           after a database restore: clear the duplicate filter, end runs that trust their memory, rewind to the restored database's recovery points (-yes; without it a dry run)
//	orderflow rewind -to T      the consumer group consumes again every message since T (-yes; without it a dry run)
//
// Every subcommand takes the same configuration as the worker and the
// bridge (flags and environment variables; `orderflow SUBCOMMAND -h` lists
// them) and exits 0 on success, 1 on a failure, a finding or a not-found, 2
// on bad usage. A backlog is not a finding: lag exits 0 whatever it reports,
// 1 when it cannot read the offsets. A service that cannot be reached is named with its address,
// never a password.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/migrations"
	"github.com/orderflow/orderflow/store"
)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"publish", "publish a scenario of order events and write its expected final state (-late FILE: its late phase)", runPublish},
	{"check", "wait until a published scenario settles and check the five invariants", runCheck},
	{"dlq", "the parked messages: dlq list [-reason KIND] [-order ID] [-since T] [-summary], dlq show ID, dlq replay [-dry-run]", runDLQ},
	{"audit", "check the invariants on the live tables; exit 1 listing every violation", runAudit},
	{"why", "explain one order: why ORDER_ID [VERSION]", runWhy},
	{"prune", "remove the details of orders finished long ago: prune -older-than 30d -yes (without -yes: a dry run)", runPrune},
	{"migrate", "apply the pending schema migrations, then exit (the only command that changes the schema; the others refuse a schema of another version)", runMigrate},
	{"gaps", "holes in the producers' sequences [-producer ID] [-gap-window 5m]; exit 1 on a suspected loss (-expected FILE: unless they are the run's lost events)", runGaps},
	{"lag", "the consumer group's backlog on the broker, per queue of the topic and its retry topic [-json]", runLag},
	{"recover", "after restoring the database from a backup, replay every event whose effect it lacks: recover -yes (without -yes: a dry run)", runRecover},
	{"rewind", "the bridges' consumer group consumes again every message since T: rewind -to T -yes (without -yes: a dry run)", runRewind},
}

// errUsage marks an error about the command line (exit status 2).
var errUsage = errors.New("usage")

// errHelp is what parsing returns for -h: usage printed, exit status 0.
var errHelp = flag.ErrHelp

func main() {
	ctx, stop := obs.SignalContext(context.Background())
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: orderflow SUBCOMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `orderflow SUBCOMMAND -h` for its flags.")
}

// run runs the subcommand args[0] and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, errHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "orderflow %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "orderflow %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "orderflow: unknown subcommand %q\n\n", args[0])
	usage(stderr)
	return 2
}

// parse parses a subcommand's settings; a bad command line wraps errUsage.
func parse(s interface {
	Parse([]string, func(string) (string, bool)) error
	Args() []string
}, args []string) error {
	if err := s.Parse(args, nil); err != nil {
		if errors.Is(err, errHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(s.Args()) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, s.Args())
	}
	return nil
}

// openStore connects to the database of cfg and checks its schema version
// (it never migrates); an unreachable database, or one whose schema is of
// another version, is named with its address, its password redacted.
func openStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := store.Open(octx, cfg.DatabaseURL, 2)
	var verr *migrations.VersionError
	if errors.As(err, &verr) {
		return nil, fmt.Errorf("PostgreSQL at %s: %w", config.Redact(cfg.DatabaseURL), err)
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s is unreachable (run `make up`): %w", config.Redact(cfg.DatabaseURL), err)
	}
	return db, nil
}
