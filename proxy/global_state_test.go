package proxy

import (
	"testing"

	"github.com/gin-gonic/gin"
)

// TestNewLeavesGinMode: building a Server does not change gin's process-wide mode; main sets
// it once (an embedding or a test may want another).
func TestNewLeavesGinMode(t *testing.T) {
	before := gin.Mode()
	t.Cleanup(func() { gin.SetMode(before) })
	gin.SetMode(gin.TestMode)
	newTestEnv(t, "", nil)
	if got := gin.Mode(); got != gin.TestMode {
		t.Fatalf("gin mode after New = %q, want %q", got, gin.TestMode)
	}
}
