package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"modelgate/platformsim"
)

// Keep-alive figures: the model thinks for thinkFor, longer than the front proxy's idle
// limit, which is several keep-alive intervals long.
const (
	keepAliveEvery = 250 * time.Millisecond
	proxyIdle      = 1200 * time.Millisecond
	thinkFor       = 2500 * time.Millisecond
)

// idleCuttingProxy is a TCP proxy in front of target that closes a connection when the side
// it relays answers from has been silent for idle: what nginx's proxy_read_timeout or a
// cloud load balancer's idle timeout does to a quiet stream.
type idleCuttingProxy struct {
	URL  string
	cuts atomic.Int64 // connections closed for idleness
}

func startIdleCuttingProxy(t *testing.T, target string, idle time.Duration) *idleCuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &idleCuttingProxy{URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.relay(client, target, idle) })
		}
	})
	return p
}

func (p *idleCuttingProxy) relay(client net.Conn, target string, idle time.Duration) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, client) // requests: no idle limit, as a client may wait silently
		server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		_ = server.SetReadDeadline(time.Now().Add(idle))
		n, err := server.Read(buf)
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				p.cuts.Add(1)
			}
			return
		}
	}
}

func keepAliveConfig(p *platform, every string) string {
	return gatewayYAML{
		upstream: "  keepalive_interval: " + every + "\n",
		models:   chatAlias + "  - id: sim-chat\n",
		teams:    alphaTeam(""),
	}.render(p)
}

// thinkingReply makes the platform's next answer pause for thinkFor after its first events.
func thinkingReply() platformsim.Reply {
	return platformsim.Reply{Silence: thinkFor, AfterEvents: 2}
}

// sdkStreams are what the official Go client made of one chat and one Responses stream.
type sdkStreams struct {
	chatChunks int
	chatText   string
	chatErr    error
	respTypes  []string
	respText   string
	respErr    error
}

func streamBoth(t *testing.T, baseURL string) sdkStreams {
	t.Helper()
	// A connection per request: an idle pooled connection cut by the proxy between requests
	// would count as a cut stream.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	client := openai.NewClient(option.WithBaseURL(baseURL+"/v1"), option.WithAPIKey(alphaKey), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	var out sdkStreams
	chat := client.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("think first")},
	})
	var text strings.Builder
	for chat.Next() {
		out.chatChunks++
		for _, ch := range chat.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	out.chatText, out.chatErr = text.String(), chat.Err()
	chat.Close()

	resp := client.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{
		Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("think first")},
	})
	text.Reset()
	for resp.Next() {
		ev := resp.Current()
		out.respTypes = append(out.respTypes, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	out.respText, out.respErr = text.String(), resp.Err()
	resp.Close()
	return out
}

// TestKeepAliveThroughIdleCuttingProxy: a model that thinks longer than a front proxy's idle
// limit loses its stream without keep-alives, and keeps it with them, the official clients
// seeing exactly the events of a stream that never paused.
func TestKeepAliveThroughIdleCuttingProxy(t *testing.T) {
	p := startPlatform(t)
	want := simAnswer("sim-chat", "think first")

	t.Run("off_is_cut", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{ConfigYAML: keepAliveConfig(p, "0s"), Env: keysEnv(p)})
		proxy := startIdleCuttingProxy(t, strings.TrimPrefix(g.URL, "http://"), proxyIdle)
		p.Sim.Enqueue("/v1/responses", thinkingReply())
		p.Sim.Enqueue("/v1/responses", thinkingReply())
		got := streamBoth(t, proxy.URL)
		if got.chatErr == nil && got.chatText == want || got.respErr == nil && slices.Contains(got.respTypes, "response.completed") {
			t.Fatalf("a silent stream survived a %v idle limit without keep-alives: %+v", proxyIdle, got)
		}
		if proxy.cuts.Load() == 0 {
			t.Fatal("the proxy cut nothing")
		}
	})

	t.Run("on", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{ConfigYAML: keepAliveConfig(p, keepAliveEvery.String()), Env: keysEnv(p)})
		proxy := startIdleCuttingProxy(t, strings.TrimPrefix(g.URL, "http://"), proxyIdle)
		plain := streamBoth(t, proxy.URL) // no pause: the reference
		p.Sim.Enqueue("/v1/responses", thinkingReply())
		p.Sim.Enqueue("/v1/responses", thinkingReply())
		start := time.Now()
		got := streamBoth(t, proxy.URL)
		if el := time.Since(start); el < 2*thinkFor {
			t.Fatalf("streams took %v: the platform did not pause", el)
		}
		if got.chatErr != nil || got.respErr != nil || proxy.cuts.Load() != 0 {
			t.Fatalf("cut despite keep-alives: chat %v, responses %v, %d cuts", got.chatErr, got.respErr, proxy.cuts.Load())
		}
		if got.chatText != want || got.respText != want {
			t.Fatalf("texts %q / %q, want %q", got.chatText, got.respText, want)
		}
		if got.chatChunks != plain.chatChunks || !slices.Equal(got.respTypes, plain.respTypes) {
			t.Fatalf("the client saw other events than in a stream without pause:\nchat %d chunks, want %d\nresponses %v\nwant %v",
				got.chatChunks, plain.chatChunks, got.respTypes, plain.respTypes)
		}
		nodeKeepAlive(t, p, proxy.URL)
	})
}

// nodeKeepAlive runs tests/node/keepalive.mjs, the same check with the official openai npm
// client, against proxyURL; the platform pauses its first two answers.
func nodeKeepAlive(t *testing.T, p *platform, proxyURL string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("node is not on PATH: the openai npm keep-alive check did not run")
		return
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeModules(t, dir)
	p.Sim.Enqueue("/v1/responses", thinkingReply())
	p.Sim.Enqueue("/v1/responses", thinkingReply())
	c, cancel := context.WithTimeout(context.Background(), nodeTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(c, node, "--test", "--test-reporter=spec", "keepalive.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MODELGATE_URL="+proxyURL, "MODELGATE_KEY="+alphaKey, "NO_COLOR=1",
		"MODELGATE_THINK_MS="+fmt.Sprint(thinkFor.Milliseconds()))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node keepalive.mjs failed (%v):\n%s", err, out)
	}
	t.Logf("node keepalive.mjs:\n%s", out)
}
