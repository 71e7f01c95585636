// Command child is the program the procs tests run. It prints a line,
// optionally serves /healthz on the address in $CHILD_ADDR once -ready-after
// has passed, and exits with -exit after -exit-after, or with -term-code on
// SIGTERM (or ignores SIGTERM with -ignore-term).
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	readyAfter := flag.Duration("ready-after", 0, "serve /healthz 200 after this long (503 before)")
	exitAfter := flag.Duration("exit-after", 0, "exit on its own after this long (0: never)")
	exitCode := flag.Int("exit", 0, "exit code with -exit-after")
	termCode := flag.Int("term-code", 0, "exit code on SIGTERM")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	flag.Parse()

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	start := time.Now()
	if addr := os.Getenv("CHILD_ADDR"); addr != "" {
		http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if time.Since(start) < *readyAfter {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		go func() {
			fmt.Fprintln(os.Stderr, http.ListenAndServe(addr, nil))
			os.Exit(3)
		}()
	}
	go func() {
		time.Sleep(*readyAfter)
		fmt.Println("child ready")
	}()
	fmt.Fprintln(os.Stderr, strings.TrimSpace("child started "+os.Getenv("CHILD_NOTE")))

	var exit <-chan time.Time
	if *exitAfter > 0 {
		exit = time.After(*exitAfter)
	}
	for {
		select {
		case <-term:
			if *ignoreTerm {
				fmt.Println("child ignores SIGTERM")
				continue
			}
			fmt.Println("child stopping")
			os.Exit(*termCode)
		case <-exit:
			os.Exit(*exitCode)
		}
	}
}
