package metrics

import (
	"runtime"

	"modelgate/config"
)

func configModel(id string) config.Model { return config.Model{ID: id} }

func configTeam(name string, keys ...string) config.Team {
	t := config.Team{Name: name}
	for _, k := range keys {
		t.Keys = append(t.Keys, config.Key{Name: k})
	}
	return t
}

// The process collector reads /proc; elsewhere it exports nothing.
func processMetricsSupported() bool { return runtime.GOOS == "linux" }
