package apitest

// SimUpstreamYAML opens a modelgate config for a test environment: listening on loopback,
// its platform the simulated one at ${SIM_URL}, reached with the platform key ${CANARY}. A
// config appends its own upstream settings, models and teams.
const SimUpstreamYAML = `
listen: 127.0.0.1:0
upstream:
  gateway_url: ${SIM_URL}
  base_url: ${SIM_URL}
  api_key: ${CANARY}
`
