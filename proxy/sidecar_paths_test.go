package proxy

import "modelgate/sidecar"

// The sidecar's fixed platform paths, as the tests here name them.
const (
	modelRunInfoPath = sidecar.ModelRunInfoPath
	modelRunListPath = sidecar.ModelRunListPath
	balancePath      = sidecar.BalancePath
	assetsPath       = sidecar.AssetsPath
)
