package translate

import (
	"github.com/tidwall/gjson"
)

// MergeChoices joins the chat.completions of n parallel upstream calls (n > 1) into one:
// choices indexed 0..n-1 in the given order, usage summed, id and model from the first.
func MergeChoices(completions [][]byte) ([]byte, error) {
	if len(completions) == 0 {
		return nil, &Error{Status: 500, Type: typeServer, Message: "no completions to merge"}
	}
	var sum Usage
	size := 64
	roots := make([]gjson.Result, len(completions))
	for i, c := range completions {
		if !ValidJSON(c) {
			return nil, invalidUpstream()
		}
		roots[i] = gjson.ParseBytes(c)
		u := roots[i].Get("usage")
		sum.InputTokens += u.Get("prompt_tokens").Int()
		sum.OutputTokens += u.Get("completion_tokens").Int()
		sum.TotalTokens += u.Get("total_tokens").Int()
		sum.CachedTokens += u.Get("prompt_tokens_details.cached_tokens").Int()
		sum.ReasoningTokens += u.Get("completion_tokens_details.reasoning_tokens").Int()
		if cw := u.Get("prompt_tokens_details.cache_write_tokens"); cw.Exists() {
			sum.CacheWriteTokens += cw.Int()
			sum.HasCacheWrite = true
		}
		size += len(c)
	}
	first := roots[0]
	b := make([]byte, 0, size)
	b = append(b, `{"id":`...)
	b = appendString(b, first.Get("id").String())
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt(b, first.Get("created").Int())
	b = append(b, `,"model":`...)
	b = appendString(b, first.Get("model").String())
	b = append(b, `,"choices":[`...)
	n := 0
	for _, r := range roots {
		each(r.Get("choices"), func(_, ch gjson.Result) bool {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = appendInt(b, int64(n))
			ch.ForEach(func(k, v gjson.Result) bool {
				if k.Str != "index" {
					b = append(b, ',')
					b = append(b, k.Raw...)
					b = append(b, ':')
					b = append(b, v.Raw...)
				}
				return true
			})
			b = append(b, '}')
			n++
			return true
		})
	}
	b = append(b, `],"usage":`...)
	b = appendUsage(b, sum)
	if st := first.Get("service_tier"); st.Type == gjson.String {
		b = append(b, `,"service_tier":`...)
		b = appendString(b, st.Str)
	}
	return append(b, '}'), nil
}
