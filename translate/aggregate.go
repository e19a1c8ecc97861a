package translate

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Aggregator builds one chat.completion from an upstream event stream, for a non-stream
// client whose request was streamed upstream (so a stop sequence can end it early).
type Aggregator struct {
	meta     Meta
	items    []outputItem // from response.output_item.done
	partial  []partialText
	all      strings.Builder // every output text so far, to find stop sequences
	maxStop  int
	terminal string // the response object of response.completed / response.incomplete
	err      *Error
	done     bool
	stopped  bool
	deltas   int64
	estimate int64
	usage    Usage
}

type outputItem struct {
	oi  int64
	raw string
}

// partialText is a message still streaming when a stop sequence ended the stream.
type partialText struct {
	oi   int64
	text strings.Builder
}

// NewAggregator prepares an aggregator for one upstream stream.
func NewAggregator(meta Meta) *Aggregator {
	a := &Aggregator{meta: meta}
	for _, s := range meta.Stop {
		a.maxStop = max(a.maxStop, len(s))
	}
	return a
}

// SetInputEstimate sets the input tokens reported when the upstream reports no usage.
func (a *Aggregator) SetInputEstimate(n int64) { a.estimate = n }

// Feed takes one upstream event; done means the answer is complete (terminal event, error
// or stop sequence) and the upstream can be cancelled.
func (a *Aggregator) Feed(eventType string, data []byte) (done bool) {
	if a.done {
		return true
	}
	switch CheckJSON(data) {
	case JSONInvalid:
		return false
	case JSONTooDeep:
		a.err = errEventTooDeep()
		a.done = true
		return true
	}
	ev := gjson.Parse(str(data)) // zero-copy: whatever is kept is cloned
	typ := ev.Get("type").Str
	if typ == "" {
		typ = eventType
	}
	switch typ {
	case "response.output_text.delta":
		a.deltas++
		a.addText(ev.Get("output_index").Int(), ev.Get("delta").String())
	case "response.refusal.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		a.deltas++
	case "response.output_item.done":
		oi := ev.Get("output_index").Int()
		a.items = append(a.items, outputItem{oi: oi, raw: strings.Clone(ev.Get("item").Raw)})
		a.partial = slices.DeleteFunc(a.partial, func(p partialText) bool { return p.oi == oi })
	case "response.completed", "response.incomplete":
		a.terminal = strings.Clone(ev.Get("response").Raw)
		a.done = true
	case "response.failed":
		resp := ev.Get("response")
		if u, ok := ReadUsage(resp.Get("usage")); ok {
			a.usage = u
		}
		if e := resp.Get("error"); e.IsObject() {
			a.err = failureError(e)
		} else {
			a.err = &Error{Status: 502, Type: typeServer, Code: "response_failed", Message: "The upstream response failed."}
		}
		a.done = true
	case "error":
		e := ev.Get("error")
		if !e.IsObject() {
			e = ev
		}
		a.err = failureError(e)
		a.done = true
	}
	return a.done
}

func (a *Aggregator) addText(oi int64, s string) {
	i := slices.IndexFunc(a.partial, func(p partialText) bool { return p.oi == oi })
	if i < 0 {
		a.partial = append(a.partial, partialText{oi: oi})
		i = len(a.partial) - 1
	}
	a.partial[i].text.WriteString(s)
	if a.maxStop == 0 {
		return
	}
	// Only the new text and the few bytes before it can hold a stop sequence not seen yet.
	from := max(0, a.all.Len()-(a.maxStop-1))
	a.all.WriteString(s)
	if at, _ := matchStop(a.all.String()[from:], a.meta.Stop); at >= 0 {
		a.stopped = true
		a.done = true
	}
}

// End notes that the upstream ended before its terminal event. A chat answer is judged by
// what came (Result reports an unfinished stream as upstream_stream_incomplete), so the
// read error adds nothing to it.
func (a *Aggregator) End(error) {}

// Result renders the chat.completion, or the *Error of a failed answer.
func (a *Aggregator) Result() ([]byte, Usage, error) {
	est := estimatedUsage(a.estimate, a.deltas)
	if a.err != nil {
		if a.usage.Reported {
			return nil, a.usage, a.err
		}
		return nil, est, a.err
	}
	switch {
	case a.terminal != "":
		resp := gjson.Parse(a.terminal)
		items := resp.Get("output").Array()
		if len(items) == 0 {
			// Some Responses backends finish with an empty output; the items came earlier,
			// and a truncated message may never have been finished.
			items = a.rebuilt()
		}
		return completion(resp, items, a.meta, &est, false)
	case a.stopped:
		resp := gjson.Parse(`{"status":"completed"}`)
		return completion(resp, a.rebuilt(), a.meta, &est, true)
	}
	return nil, est, &Error{Status: 502, Type: typeServer, Code: "upstream_stream_incomplete", Message: "upstream stream terminated unexpectedly"}
}

// rebuilt orders the finished items and the messages still streaming by output index.
func (a *Aggregator) rebuilt() []gjson.Result {
	all := slices.Clone(a.items)
	for i := range a.partial {
		p := &a.partial[i]
		raw := appendString([]byte(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":`), p.text.String())
		all = append(all, outputItem{oi: p.oi, raw: string(append(raw, "}]}"...))})
	}
	slices.SortStableFunc(all, func(x, y outputItem) int { return int(x.oi - y.oi) })
	items := make([]gjson.Result, len(all))
	for i, it := range all {
		items[i] = gjson.Parse(it.raw)
	}
	return items
}
