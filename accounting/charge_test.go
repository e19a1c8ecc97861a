package accounting

import (
	"testing"

	"modelgate/ratelimit"
)

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
