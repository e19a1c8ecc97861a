package platformsim

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

const sidecarPrefix = "/api/open/v2/"

// serveSidecar answers the open-API routes modelgate's sidecar uses; anything else under
// /api/open/v2 is a 404 envelope.
func (s *Sim) serveSidecar(w http.ResponseWriter, r *http.Request, path string) {
	if path == sidecarPrefix+"assets" {
		s.serveUpload(w, r)
		return
	}
	s.recordRequest(r)
	var route func(r *http.Request, key string) answer
	switch {
	case path == sidecarPrefix+"balance/info":
		route = s.balance
	case path == sidecarPrefix+"model-runs/info":
		route = s.modelRunInfo
	case path == sidecarPrefix+"model-runs/list":
		route = s.modelRunList
	case strings.HasPrefix(path, sidecarPrefix+"assets/") && validID(strings.TrimPrefix(path, sidecarPrefix+"assets/")):
		id := strings.TrimPrefix(path, sidecarPrefix+"assets/")
		route = func(r *http.Request, key string) answer { return s.assetInfo(id, key) }
	default:
		writeEnvelope(w, http.StatusNotFound, codeBusiness, "not found", nil)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeEnvelope(w, http.StatusMethodNotAllowed, codeBusiness, "method not allowed", nil)
		return
	}
	key := s.bearerKey(r)
	if key == "" {
		writeEnvelope(w, http.StatusUnauthorized, codeNotLoggedIn, "not logged in", nil)
		return
	}
	rep, scripted := s.dequeue(r)
	if scripted && rep.replaces() {
		s.send(w, r, rep.answer(), rep)
		return
	}
	s.send(w, r, route(r, key), rep)
}

// validID accepts the characters platform ids are made of; anything else (an escaped slash, a
// dot segment) is not an asset route at all.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// balance is exactly the two numbers the specification shows.
func (s *Sim) balance(*http.Request, string) answer {
	return envelopeAnswer(http.StatusOK, codeOK, "success", map[string]any{"balance": 123.45, "card_balance": 10})
}

// modelRun is an external-model task; money fields are decimal strings with 8 fraction digits.
type modelRun struct {
	RunID            string         `json:"run_id"`
	Model            string         `json:"model"`
	GatewayTaskID    string         `json:"gateway_task_id"`
	Status           string         `json:"status"`
	SettlementStatus string         `json:"settlement_status"`
	FrozenAmount     string         `json:"frozen_amount"`
	FinalAmount      string         `json:"final_amount"`
	ReleasedAmount   string         `json:"released_amount"`
	Output           map[string]any `json:"output"`
	ErrorCode        string         `json:"error_code"`
	ErrorMessage     string         `json:"error_message"`
	createdAt        string
}

type modelRunItem struct {
	RunID            string `json:"run_id"`
	Model            string `json:"model"`
	Status           string `json:"status"`
	SettlementStatus string `json:"settlement_status"`
	FrozenAmount     string `json:"frozen_amount"`
	CreatedAt        string `json:"created_at"`
}

// seededRuns are the tasks every key sees, newest first.
var seededRuns = []modelRun{
	{RunID: "run_000007", Model: "image-gen-1", GatewayTaskID: "gtask_000007", Status: "completed", SettlementStatus: "settled",
		FrozenAmount: "0.05000000", FinalAmount: "0.05000000", ReleasedAmount: "0.00000000",
		Output: map[string]any{"url": "https://assets.sim.invalid/outputs/run_000007.png"}, createdAt: "2025-08-03 09:30:00"},
	{RunID: "run_000006", Model: "video-gen-pro", GatewayTaskID: "gtask_000006", Status: "created", SettlementStatus: "pending",
		FrozenAmount: "0.50000000", FinalAmount: "0.00000000", ReleasedAmount: "0.00000000",
		Output: map[string]any{}, createdAt: "2025-08-03 09:00:00"},
	{RunID: "run_000005", Model: "video-gen-pro", GatewayTaskID: "gtask_000005", Status: "cancelled", SettlementStatus: "released",
		FrozenAmount: "0.50000000", FinalAmount: "0.00000000", ReleasedAmount: "0.50000000",
		Output: map[string]any{}, createdAt: "2025-08-02 18:45:00"},
	{RunID: "run_000004", Model: "video-gen-pro", GatewayTaskID: "gtask_000004", Status: "failed", SettlementStatus: "released",
		FrozenAmount: "0.50000000", FinalAmount: "0.00000000", ReleasedAmount: "0.50000000",
		Output: map[string]any{}, ErrorCode: "GENERATION_FAILED", ErrorMessage: "the model could not render the video",
		createdAt: "2025-08-02 12:10:00"},
	{RunID: "run_000003", Model: "video-gen-lite", GatewayTaskID: "gtask_000003", Status: "queued", SettlementStatus: "pending",
		FrozenAmount: "0.12000000", FinalAmount: "0.00000000", ReleasedAmount: "0.00000000",
		Output: map[string]any{}, createdAt: "2025-08-02 08:00:00"},
	{RunID: "run_000002", Model: "video-gen-lite", GatewayTaskID: "gtask_000002", Status: "running", SettlementStatus: "pending",
		FrozenAmount: "0.12000000", FinalAmount: "0.00000000", ReleasedAmount: "0.00000000",
		Output: map[string]any{}, createdAt: "2025-08-01 16:20:00"},
	{RunID: "run_000001", Model: "video-gen-pro", GatewayTaskID: "gtask_000001", Status: "completed", SettlementStatus: "settled",
		FrozenAmount: "0.50000000", FinalAmount: "0.42000000", ReleasedAmount: "0.08000000",
		Output: map[string]any{"url": "https://assets.sim.invalid/outputs/run_000001.mp4",
			"video_url": "https://assets.sim.invalid/outputs/run_000001.mp4"}, createdAt: "2025-08-01 10:00:00"},
}

var runStatuses = []string{"created", "queued", "running", "completed", "failed", "cancelled"}

func (s *Sim) modelRunInfo(r *http.Request, _ string) answer {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return envelopeAnswer(http.StatusBadRequest, codeBusiness, "parameter parse failure", nil)
	}
	id := q.Get("run_id")
	switch id {
	case "":
		return altErrorAnswer(http.StatusBadRequest, codeBusiness, "run_id is required", "missing_parameter", "run_id")
	case "run_err_m1":
		return envelopeAnswer(http.StatusOK, codeFailure, "query failed", nil)
	case "run_err_m2":
		return envelopeAnswer(http.StatusOK, codeSystem, "system exception", nil)
	case "run_alt":
		return altErrorAnswer(http.StatusBadRequest, codeBusiness, "invalid run_id", "invalid_parameter", "run_id")
	}
	for _, run := range seededRuns {
		if run.RunID == id {
			return envelopeAnswer(http.StatusOK, codeOK, "success", run)
		}
	}
	return envelopeAnswer(http.StatusOK, codeBusiness, "task not found", nil)
}

func (s *Sim) modelRunList(r *http.Request, _ string) answer {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return envelopeAnswer(http.StatusBadRequest, codeBusiness, "parameter parse failure", nil)
	}
	status := q.Get("status")
	if status != "" && !slices.Contains(runStatuses, status) {
		return envelopeAnswer(http.StatusBadRequest, codeBusiness, "invalid status", nil)
	}
	page, ok1 := positiveInt(q.Get("page"), 1)
	size, ok2 := positiveInt(q.Get("page_size"), 20)
	if !ok1 || !ok2 {
		return envelopeAnswer(http.StatusBadRequest, codeBusiness, "parameter parse failure", nil)
	}
	size = min(size, 100)
	items := []modelRunItem{}
	for _, run := range seededRuns {
		if status == "" || run.Status == status {
			items = append(items, modelRunItem{RunID: run.RunID, Model: run.Model, Status: run.Status,
				SettlementStatus: run.SettlementStatus, FrozenAmount: run.FrozenAmount, CreatedAt: run.createdAt})
		}
	}
	total := len(items)
	start := min((page-1)*size, total)
	return envelopeAnswer(http.StatusOK, codeOK, "success",
		map[string]any{"total": total, "items": items[start:min(start+size, total)]})
}

// positiveInt parses an optional query integer of at least 1.
func positiveInt(v string, def int) (int, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<20 {
		return 0, false
	}
	return n, true
}
