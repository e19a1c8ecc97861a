// Package translate converts between the Chat Completions API that clients speak and the
// Responses API that the platform gateway speaks: requests one way, answers and streams the
// other way.
//
// The package is pure on purpose: no network, no clock, no mutable globals. The proxy owns
// every side effect (reading bodies, timing, cancelling the upstream), so everything here is
// testable byte for byte against recorded traffic, and the same input always gives the same
// output. A test enforces the import rules.
package translate
