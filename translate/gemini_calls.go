package translate

// geminiCalls are the function calls of a request's history, for pairing each
// functionResponse with the call it answers: by id when the response has one, else the
// earliest unanswered call of its name (Gemini's own calls often carry no id). Both lookups
// go through maps, so a history of many calls and responses costs linear time, not the
// square of its length.
type geminiCalls struct {
	list    []geminiCall
	byID    map[string]int   // call id to its index in list
	pending map[string][]int // name to the indexes of its calls, oldest first; answered ones are skipped when met
}

// geminiCall is one functionCall of the history: its call_id upstream, its name, and
// whether a functionResponse answered it.
type geminiCall struct {
	id, name string
	answered bool
}

// add records a call; false if its id is taken.
func (c *geminiCalls) add(id, name string) bool {
	if c.byID == nil {
		c.byID, c.pending = make(map[string]int), make(map[string][]int)
	}
	if _, taken := c.byID[id]; taken {
		return false
	}
	c.byID[id] = len(c.list)
	c.pending[name] = append(c.pending[name], len(c.list))
	c.list = append(c.list, geminiCall{id: id, name: name})
	return true
}

// answer marks and returns the call a response of this id and name answers, nil if none is
// left: the unanswered call of that id and name, or without such an id the earliest
// unanswered call of the name.
func (c *geminiCalls) answer(id, name string) *geminiCall {
	if len(c.list) == 0 {
		return nil
	}
	if i, ok := c.byID[id]; ok && id != "" && !c.list[i].answered && c.list[i].name == name {
		c.list[i].answered = true
		return &c.list[i]
	}
	q := c.pending[name]
	for len(q) > 0 && c.list[q[0]].answered {
		q = q[1:]
	}
	if len(q) == 0 {
		c.pending[name] = q
		return nil
	}
	call := &c.list[q[0]]
	c.pending[name] = q[1:]
	call.answered = true
	return call
}
