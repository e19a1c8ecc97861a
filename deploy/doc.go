// Package deploy holds modelgate's deployment examples (docker-compose.yaml, kubernetes.yaml
// and the config.yaml they share, and tracing/docker-compose.yaml, a local Jaeger). Its test
// parses them, since a typo in an example is only found by the person who copies it.
package deploy
