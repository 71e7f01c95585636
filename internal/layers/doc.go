// Package layers keeps the module's import structure: its test reads the
// import graph with `go list` and fails on an import against the layers.
//
// The layers, as the test enforces them:
//
//   - leaves: fsm (the order's state machine), wire (the envelope, the dead
//     letter, the sanitizer every layer carries), api (the Temporal names)
//     and config import no package of the module;
//   - the flow, upstream first: message (the decoder) → bridge → workflows
//     → activities → store. A package of the flow imports, directly or
//     through any other package of the module, only packages downstream of
//     it in the flow, and the leaves;
//   - the oracle: check and scenario import no package of the pipeline
//     (fsm, wire, api, message, bridge, workflows, activities, store,
//     dedup, producer), so that a wrong rule there cannot pass its own
//     verdict;
//   - the commands (cmd/orderflow, starter, worker, producer, bench) and
//     the test helpers wire the layers together and may import any of
//     them.
//
// The rules have no exceptions: any import against them fails the test.
package layers
