package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/config"
	"modelgate/modelsapi"
	"modelgate/routing"
)

// modelTable maps client-facing model ids to the names sent upstream: one name, or a choice
// between weighted routes (routes.go).
type modelTable struct {
	list    []config.Model
	entries map[string]modelEntry
	// anySticky: some model places its calls by a sticky key, read from request bodies.
	anySticky bool
	// owners maps a platform model an entry sends calls to (its upstream or a route's
	// target) and that no entry has as its id to that entry's id, the first listed when
	// several send there (config.PlatformOwners; `modelgate check` warns of those).
	owners map[string]string
	// refuseUnlisted: a name that is neither an id nor in owners is refused
	// (limits.unlisted_models).
	refuseUnlisted bool
}

// modelEntry is where one client-facing id's calls go.
type modelEntry struct {
	upstream string         // the platform's name when the id has no routes
	routes   *routing.Table // the id's weighted routes; nil when it has none
	sticky   string         // config.StickyUser, config.StickyConversation or ""
}

func newModelTable(models []config.Model) modelTable {
	t := modelTable{list: models, entries: make(map[string]modelEntry, len(models))}
	for _, m := range models {
		up := m.Upstream
		if up == "" {
			up = m.ID
		}
		e := modelEntry{upstream: up, sticky: m.Sticky}
		t.anySticky = t.anySticky || (m.Sticky != "" && len(m.Routes) > 0)
		if len(m.Routes) > 0 {
			e.routes = newRouteTable(m.Routes)
		}
		t.entries[m.ID] = e
	}
	for name, ids := range config.PlatformOwners(models) {
		if t.owners == nil {
			t.owners = make(map[string]string)
		}
		t.owners[name] = ids[0]
	}
	return t
}

// resolve is the entry a call naming name is (issue 40): the entry with that id, else the
// entry that sends calls to that platform model, so a platform name cannot escape its
// entry's allow-list, prices, limits and calibration. A name no entry names is itself when
// unlisted models are allowed; ok is false when they are refused. It runs in every
// dialect's check, before anything is decided by the model.
func (t modelTable) resolve(name string) (id string, ok bool) {
	if _, listed := t.entries[name]; listed {
		return name, true
	}
	if id, sent := t.owners[name]; sent {
		return id, true
	}
	return name, !t.refuseUnlisted
}

// model is the configured model id, or nil.
func (t modelTable) model(id string) *config.Model {
	for i := range t.list {
		if t.list[i].ID == id {
			return &t.list[i]
		}
	}
	return nil
}

// modelCatalog is the model listing routes' view of the models (modelsapi): those of the
// request's config its caller may use.
func (s *Server) modelCatalog() *modelsapi.Catalog {
	return &modelsapi.Catalog{
		Allowed: func(c *gin.Context) []string {
			p, st := principal(c), requestState(c)
			ids := make([]string, 0, len(st.models.list))
			for _, m := range st.models.list {
				if p.AllowsModel(m.ID) {
					ids = append(ids, m.ID)
				}
			}
			return ids
		},
		Allows: func(c *gin.Context, id string) bool {
			_, ok := requestState(c).models.entries[id]
			return ok && principal(c).AllowsModel(id)
		},
	}
}
