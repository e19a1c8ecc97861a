// Package wsmode serves the Responses API's WebSocket mode: a client opens one connection to
// /v1/responses and sends `response.create` messages, and each one's stream events come back
// as text frames. Agents that go back and forth with the model dozens of times per task send
// only their new input items and previous_response_id each turn.
//
// The platform's gateway speaks HTTP, so the socket ends here. A turn is served by the same
// handler that serves POST /v1/responses, in process: the turn's body becomes an HTTP request
// with the connection's credentials and a response writer of its own (a Turn), to which the
// relay hands the stream's events whole, each becoming a frame (an answer that is not a
// stream, a refusal in the route's error shape, becomes one `error` event). What the route
// tells the turn (the input it sent, what it was charged) goes through that writer too. So
// every turn is admitted, limited, reserved, settled, billed, traced and logged exactly as an
// HTTP request is, by the one lifecycle, and this package knows nothing of limits or
// accounting. A message that asks the model nothing (generate: false) is served here, but
// only once the proxy's admission handed in (Options.Prepares) has authenticated, counted and
// logged it as a request.
//
// What the socket adds is kept here: the connection-local memory of each chain's last
// response (so previous_response_id works with store: false), lanes (stream_id: turns of one
// lane in order, lanes side by side, lane.go), steering (response.steer: a response cut at an
// output boundary and continued by a successor, steer.go), the per-key cap on open
// connections, the connection's maximum age, keep-alive pings, and the drain.
package wsmode
