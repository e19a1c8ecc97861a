package main

import (
	"crypto/x509"
	"fmt"
	"log/slog"

	"modelgate/config"
	"modelgate/platformsim"
)

// simulatedModels are listed when --simulate runs with a config that names no models.
var simulatedModels = []string{"sim-chat", "sim-tools", "sim-reasoning", "sim-json", "sim-long", "sim-slow", "sim-refusal", "sim-incomplete", "sim-failed"}

// simulated is the embedded platform of --simulate, started once for the life of the
// process. Every config loaded under --simulate, at start and at each SIGHUP, is pointed
// at it by point, so a reload keeps the platform, its address and its protocol: the
// upstream URLs are restart-only settings, and the platform's records (its ids, what it
// billed) must outlive a reload like a real platform's.
type simulated struct {
	url      string
	protocol string
	roots    *x509.CertPool // --simulate-upstream h2: the one CA the platform's certificate chains to
	stop     func()
}

// startSimulated serves a simulated platform on loopback for protocol.
func startSimulated(protocol string, logger *slog.Logger) (*simulated, error) {
	// A tag of this run in every id: responses kept before a restart keep their ids.
	sim := platformsim.New(platformsim.Options{IDTag: runTag()})
	served, err := sim.Serve("127.0.0.1:0", platformsim.ServeOptions{
		Protocol: protocol,
		// Once per protocol, so a run shows what modelgate speaks to the platform.
		FirstRequest: func(proto string) { logger.Info("simulated platform: first request", "protocol", proto) },
	})
	if err != nil {
		return nil, fmt.Errorf("start simulated platform: %w", err)
	}
	s := &simulated{url: served.URL, protocol: protocol, stop: served.Stop}
	if protocol == platformsim.ServeH2 {
		s.roots = served.RootCAs
	}
	return s, nil
}

// point sends cfg's upstream to the embedded platform, as the flags --gateway-url and
// --base-url would, and gives a config without models the simulator's own. A nil s (no
// --simulate) leaves cfg alone.
func (s *simulated) point(cfg *config.Config) {
	if s == nil {
		return
	}
	cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL = s.url, s.url
	switch s.protocol {
	case platformsim.ServeH2:
		cfg.Upstream.HTTP2 = config.HTTP2Auto
	case platformsim.ServeH2C:
		cfg.Upstream.HTTP2 = config.HTTP2Cleartext
	}
	if len(cfg.Models) == 0 {
		for _, id := range simulatedModels {
			cfg.Models = append(cfg.Models, config.Model{ID: id})
		}
	}
}
