package main

import (
	"fmt"
	"os"
	"strconv"
)

// storeCase is one route measured through two fresh modelgates that differ only in
// responses.store: local (every answer kept in the embedded store) and off.
type storeCase struct {
	name             string
	body             []byte
	offRPS, localRPS []float64
	ratios           []float64 // local rps / off rps, per round
	offCPU, localCPU []float64 // µs per request
}

// storeCost prices keeping responses: the same wrk runs against a modelgate that keeps
// every answer and one that keeps none, alternating within each round. benchup gives
// every answer an id of its own, so each is a new record, as with a real platform.
func (b *bench) storeCost() error {
	local, err := b.startModelgateWith("mg-store-local", false, "responses:\n  store: local\n")
	if err != nil {
		return err
	}
	defer local.stop()
	off, err := b.startModelgateWith("mg-store-off", false, "responses:\n  store: off\n")
	if err != nil {
		return err
	}
	defer off.stop()
	cases := []*storeCase{
		{name: "/v1/responses", body: respBody},
		{name: "/v1/responses stream", body: respStreamBody},
	}
	scripts := make([]string, len(cases))
	for i, c := range cases {
		if scripts[i], err = luaScript(b.o.workDir, "store-"+strconv.Itoa(i), benchKey, c.body); err != nil {
			return err
		}
		for _, p := range []*proc{local, off} {
			if err := warmUp(p, "/v1/responses", scripts[i], b.o.threads, b.o.conns); err != nil {
				return err
			}
		}
	}
	for round := range b.o.rounds {
		for i, c := range cases {
			err := inTurn(round+i,
				func() error {
					r, err := b.wrkOnce(off, "/v1/responses", scripts[i], b.o.threads, b.o.conns, b.o.duration)
					c.offRPS, c.offCPU = append(c.offRPS, r.res.rps), append(c.offCPU, us(r.cpuPerReq))
					return err
				},
				func() error {
					r, err := b.wrkOnce(local, "/v1/responses", scripts[i], b.o.threads, b.o.conns, b.o.duration)
					c.localRPS, c.localCPU = append(c.localRPS, r.res.rps), append(c.localCPU, us(r.cpuPerReq))
					return err
				})
			if err != nil {
				return err
			}
			n := len(c.offRPS) - 1
			c.ratios = append(c.ratios, c.localRPS[n]/c.offRPS[n])
			fmt.Fprintf(os.Stderr, "round %d %-22s off %8.0f rps %6.1f µs  local %8.0f rps %6.1f µs  ratio %.3f\n", round+1, c.name,
				c.offRPS[n], c.offCPU[n], c.localRPS[n], c.localCPU[n], c.ratios[n])
		}
	}
	b.rep.store = cases
	return nil
}
