package sidecar

import (
	"testing"
	"time"

	"modelgate/config"
	"modelgate/reqlog"
)

// What the routes noted reaches the request's record; what they left empty does not wipe
// what the record already holds, and a client gone stays gone.
func TestCallReport(t *testing.T) {
	for _, tc := range []struct {
		name string
		call Call
		rec  reqlog.Record
		want reqlog.Record
	}{
		{"nothing noted", Call{}, reqlog.Record{ErrCode: "earlier", ClientClosed: true}, reqlog.Record{ErrCode: "earlier", ClientClosed: true}},
		{"a failure", Call{ErrCode: "10001", UpstreamErr: "timeout"}, reqlog.Record{}, reqlog.Record{ErrCode: "10001", UpstreamErr: "timeout"}},
		{"a client gone", Call{ClientGone: true}, reqlog.Record{}, reqlog.Record{ClientClosed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec
			tc.call.Report(&rec)
			if rec.ErrCode != tc.want.ErrCode || rec.UpstreamErr != tc.want.UpstreamErr || rec.ClientClosed != tc.want.ClientClosed {
				t.Errorf("record %q %q %v, want %q %q %v", rec.ErrCode, rec.UpstreamErr, rec.ClientClosed,
					tc.want.ErrCode, tc.want.UpstreamErr, tc.want.ClientClosed)
			}
		})
	}
}

// The routes' settings are the config's, field by field.
func TestSettingsOf(t *testing.T) {
	var cfg config.Config
	cfg.Upstream.RequestTimeout = 3 * time.Second
	cfg.Sidecar.BalanceCacheTTL = 5 * time.Second
	cfg.Server.MaxUploadBytes = 7
	cfg.Server.UploadIdleTimeout = 11 * time.Second
	want := Settings{RequestTimeout: 3 * time.Second, BalanceCacheTTL: 5 * time.Second, MaxUploadBytes: 7, UploadIdleTimeout: 11 * time.Second}
	if got := SettingsOf(&cfg); got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}
}
