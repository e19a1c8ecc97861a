package proxy

import (
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/config"
	"modelgate/translate"
)

// droppedToolsHeader names the tools left out of a call because the platform cannot run
// them (issue 45): Anthropic's server tools (web_search, web_fetch, code_execution) and
// OpenAI's hosted tools (web_search, file_search, ...), comma-separated, each once. The names
// are translate's fixed families, never the client's text, so the header is bounded.
const droppedToolsHeader = "x-modelgate-dropped-tools"

// parseOptions are the translation options the config sets for a request's parse.
func parseOptions(st *state) translate.ParseOptions {
	return translate.ParseOptions{RefuseServerTools: st.cfg.Translate.ServerTools == config.ServerToolsRefuse}
}

// noteDroppedTools tells the client which of its tools were left out, when any were. Out
// of line, so the join takes no room in the dialect's check, whose frame is under the
// parse's (TestOpenStreamStack).
//
//go:noinline
func noteDroppedTools(c *gin.Context, names []string) {
	if len(names) > 0 {
		c.Header(droppedToolsHeader, strings.Join(names, ","))
	}
}
