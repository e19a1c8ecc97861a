package proxy

import "testing"

// A check run aside answers as it would in place, and its panic reaches the handler's
// goroutine, where the recoverer answers it (an unrecovered panic on the aside goroutine
// would end the process).
func TestCheckedAside(t *testing.T) {
	if !checkedAside(func() bool { return true }) || checkedAside(func() bool { return false }) {
		t.Fatal("the check's answer was not returned")
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the check's panic", r)
		}
	}()
	checkedAside(func() bool { panic("boom") })
	t.Fatal("the panic did not reach the caller")
}

func TestDeclaresTools(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","tools":[]}`:                              true,
		`{"contents":[],"tools":[{"functionDeclarations":[]}]}`: true,
		`{"model":"m","input":"use the tools"}`:                 false,
	} {
		if declaresTools([]byte(body)) != want {
			t.Errorf("%s: declaresTools = %v", body, !want)
		}
	}
}
