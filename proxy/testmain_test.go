package proxy

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain puts gin in release mode once, as main does, so the engines the tests build do
// not print their routes.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}
