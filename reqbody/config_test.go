package reqbody_test

import (
	"testing"
	"time"

	"modelgate/config"
	"modelgate/reqbody"
)

// A body's bounds are the config's server settings, with the rooms the server shares.
func TestLimitsOf(t *testing.T) {
	var cfg config.Config
	cfg.Server.MaxBodyBytes = 11
	cfg.Server.MaxInflatingBytes = 13
	cfg.Server.BodyReadTimeout = 17 * time.Second
	cfg.Server.MaxInflightBodyBytes = 19
	budget, room := new(reqbody.Budget), new(reqbody.Room)
	got := reqbody.LimitsOf(&cfg, budget, room)
	want := reqbody.Limits{MaxBytes: 11, MaxInflating: 13, Timeout: 17 * time.Second, Budget: budget, Room: room,
		MaxInflight: 19, RoomWait: reqbody.RoomWait}
	if got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
}
