package accounting

import (
	"testing"

	"modelgate/ratelimit"
)

// TestChargeForTable: the one charge rule against the settlement table of docs/accounting.md,
// a row each (reservation 10 in, 100 out; read 10 in and 7 out unless the row says more).
func TestChargeForTable(t *testing.T) {
	u := func(in, out int64) ratelimit.Usage { return ratelimit.Usage{InputTokens: in, OutputTokens: out} }
	reserve, read, platform := u(10, 100), u(10, 7), u(8, 42)
	known := Charge{Usage: platform, Reported: 1}
	tests := []struct {
		row  string
		e    Ending
		want Charge
	}{
		{"non-stream answer with a usage object", Ending{How: Unreadable, Reported: true, Read: platform}, known},
		{"stream ending in a terminal event with usage", Ending{How: PlatformCut, Reported: true, Read: platform}, known},
		{"terminal event with usage as the client left", Ending{How: OwnCut, Reported: true, Read: platform}, known},
		{"refused by the platform, or never sent", Ending{How: NotBilled}, Charge{}},
		{"a refusal's report changes nothing", Ending{How: NotBilled, Reported: true, Read: platform}, known},
		{"sent, no answer headers (a stall too)", Ending{How: Unanswered}, Charge{Usage: reserve, Unknown: NoAnswer}},
		{"2xx answer unreadable, without usage, or in the other form", Ending{How: Unreadable}, Charge{Usage: reserve, Unknown: BadBody}},
		{"stream cut by the platform", Ending{How: PlatformCut, Read: read}, Charge{Usage: reserve, Unknown: StreamCut}},
		{"stream cut by the platform after more than the reservation", Ending{How: PlatformCut, Read: u(10, 150)}, Charge{Usage: u(10, 150), Unknown: StreamCut}},
		{"modelgate's own cut: client left, stop sequence", Ending{How: OwnCut, Read: read}, Charge{Usage: u(10, 7+InFlightAllowance), Unknown: EarlyEnd}},
		{"own cut: the allowance stops at the reservation", Ending{How: OwnCut, Read: u(10, 95)}, Charge{Usage: u(10, 100), Unknown: EarlyEnd}},
		{"n>1 choice abandoned, no terminal event in the drain", Ending{How: FanoutAbandoned, Read: read}, Charge{Usage: reserve, Unknown: FanoutCut}},
		{"n>1 choice abandoned, its terminal event in the drain", Ending{How: FanoutAbandoned, Reported: true, Read: platform}, known},
		{"killed in flight, charged by the next start", Ending{How: Killed}, Charge{Usage: reserve, Unknown: Crashed}},
		{"an end of no known kind is never charged below a cut", Ending{How: End(200), Read: read}, Charge{Usage: reserve, Unknown: StreamCut}},
	}
	for _, tc := range tests {
		t.Run(tc.row, func(t *testing.T) {
			if got := ChargeFor(reserve, tc.e); got != tc.want {
				t.Errorf("ChargeFor(%+v) = %+v, want %+v", tc.e, got, tc.want)
			}
		})
	}
}

// TestForAnswer: a JSON answer is charged its reported usage, else the reservation as an
// unreadable body, however little it read.
func TestForAnswer(t *testing.T) {
	reserve := ratelimit.Usage{InputTokens: 10, OutputTokens: 100}
	got := ForAnswer(reserve, ratelimit.Usage{InputTokens: 3, OutputTokens: 4}, true)
	if want := (Charge{Usage: ratelimit.Usage{InputTokens: 3, OutputTokens: 4}, Reported: 1}); got != want {
		t.Errorf("reported: %+v, want %+v", got, want)
	}
	got = ForAnswer(reserve, ratelimit.Usage{InputTokens: 3}, false)
	if want := (Charge{Usage: reserve, Unknown: BadBody}); got != want {
		t.Errorf("unreported: %+v, want %+v", got, want)
	}
}

func TestChargeRules(t *testing.T) {
	u := func(in, out int64) ratelimit.Usage { return ratelimit.Usage{InputTokens: in, OutputTokens: out} }
	reserve := u(10, 100)
	tests := []struct {
		name string
		got  Charge
		want Charge
	}{
		{"known", Known(u(3, 4)), Charge{Usage: u(3, 4), Reported: 1}},
		{"choices_add_their_reports", Known(u(3, 4)).Plus(Known(u(3, 5))).Plus(Charge{}), Charge{Usage: u(6, 9), Reported: 2}},
		{"bound_is_the_reservation", UpperBound(reserve, u(10, 7), StreamCut), Charge{Usage: u(10, 100), Unknown: StreamCut}},
		{"bound_never_below_what_was_read", UpperBound(reserve, u(10, 150), StreamCut), Charge{Usage: u(10, 150), Unknown: StreamCut}},
		{"early_cut_adds_the_allowance", EarlyCut(reserve, u(10, 7), EarlyEnd), Charge{Usage: u(10, 7+InFlightAllowance), Unknown: EarlyEnd}},
		{"early_cut_allowance_capped_by_the_reservation", EarlyCut(reserve, u(10, 95), EarlyEnd), Charge{Usage: u(10, 100), Unknown: EarlyEnd}},
		{"early_cut_past_the_reservation", EarlyCut(reserve, u(10, 120), EarlyEnd), Charge{Usage: u(10, 120), Unknown: EarlyEnd}},
		{"sum_keeps_the_first_reason", Known(u(1, 1)).Plus(UpperBound(reserve, u(0, 0), NoAnswer)).Plus(EarlyCut(reserve, u(0, 0), EarlyEnd)),
			Charge{Usage: u(21, 117), Unknown: NoAnswer, Reported: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %+v, want %+v", tc.got, tc.want)
			}
		})
	}
}
