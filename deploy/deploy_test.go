package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"modelgate/apitest"
	"modelgate/config"
)

// Only the fields the checks read; yaml ignores the rest.
type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Args          []string `yaml:"args"`
	Env           []envVar `yaml:"env"`
	Ports         []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe    *probe `yaml:"startupProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		EmptyDir any `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// configVars lists the ${NAME}s the shared example config needs.
func configVars(t *testing.T) []string {
	var names []string
	for _, m := range varRE.FindAllStringSubmatch(string(apitest.ReadFile(t, "config.yaml")), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("config.yaml names no ${VAR}: secrets would have to live in the file")
	}
	return names
}

// exampleConfig is deploy/config.yaml loaded the way modelgate loads it, with every
// variable set to a plausible secret.
func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse(apitest.ReadFile(t, "config.yaml"), "config.yaml", func(name string) (string, bool) {
		return "test-secret-" + strings.ToLower(name), true
	})
	if err != nil {
		t.Fatalf("deploy/config.yaml does not load: %v", err)
	}
	return cfg
}

func TestExampleConfigLoads(t *testing.T) {
	cfg := exampleConfig(t)
	if !cfg.KeysMode() {
		t.Error("the sidecar example should hand the app a local key (keys mode)")
	}
	if cfg.Server.DrainTimeout <= 0 {
		t.Error("drain_timeout must be positive")
	}
	if cfg.Upstream.APIKey != "test-secret-platform_api_key" {
		t.Error("upstream.api_key should come from ${PLATFORM_API_KEY}")
	}
}

func TestExampleConfigRejectsEmptySecrets(t *testing.T) {
	// The Kubernetes Secret ships with empty values; modelgate must refuse to start on them.
	_, err := config.Parse(apitest.ReadFile(t, "config.yaml"), "config.yaml", func(string) (string, bool) { return "", true })
	if err == nil {
		t.Fatal("an empty platform or app key was accepted")
	}
}

func kubernetesManifests(t *testing.T) map[string]manifest {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(apitest.ReadFile(t, "kubernetes.yaml")))
	out := map[string]manifest{}
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubernetes.yaml: %v", err)
		}
		if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
			t.Fatalf("kubernetes.yaml: a document lacks apiVersion, kind or metadata.name: %+v", m)
		}
		out[m.Kind] = m
	}
	return out
}

func findContainer(cs []container, name string) *container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func envNamed(c *container, name string) *envVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestKubernetesSidecar(t *testing.T) {
	ms := kubernetesManifests(t)
	secret, cm, deploy := ms["Secret"], ms["ConfigMap"], ms["Deployment"]
	if deploy.Kind == "" || cm.Kind == "" || secret.Kind == "" {
		t.Fatalf("want a Secret, a ConfigMap and a Deployment, got %v", keys(ms))
	}
	if cm.Data["config.yaml"] != string(apitest.ReadFile(t, "config.yaml")) {
		t.Error("the ConfigMap's config.yaml differs from deploy/config.yaml; keep them identical")
	}
	for k, v := range secret.StringData {
		if v != "" {
			t.Errorf("Secret key %s ships a value; examples must not carry credentials", k)
		}
	}

	pod := deploy.Spec.Template.Spec
	mg := findContainer(pod.InitContainers, "modelgate")
	if mg == nil || mg.RestartPolicy != "Always" {
		t.Fatal("modelgate should be a native sidecar: an init container with restartPolicy Always")
	}
	app := findContainer(pod.Containers, "app")
	if app == nil {
		t.Fatal("no app container")
	}

	t.Run("probes", func(t *testing.T) {
		port := 0
		for _, p := range mg.Ports {
			if p.Name == "http" {
				port = p.ContainerPort
			}
		}
		if port != 8080 {
			t.Errorf("container port http = %d, want 8080 (the image listens there)", port)
		}
		for _, tc := range []struct {
			name string
			p    *probe
			path string
		}{
			{"startup", mg.StartupProbe, "/healthz"},
			{"liveness", mg.LivenessProbe, "/healthz"},
			{"readiness", mg.ReadinessProbe, "/readyz"},
		} {
			if tc.p == nil || tc.p.HTTPGet == nil {
				t.Errorf("%s probe missing", tc.name)
				continue
			}
			if tc.p.HTTPGet.Path != tc.path || (tc.p.HTTPGet.Port != "http" && tc.p.HTTPGet.Port != 8080) {
				t.Errorf("%s probe = %s on %v, want %s on the http port", tc.name, tc.p.HTTPGet.Path, tc.p.HTTPGet.Port, tc.path)
			}
		}
	})

	t.Run("secrets", func(t *testing.T) {
		for _, name := range configVars(t) {
			ev := envNamed(mg, name)
			if ev == nil {
				t.Errorf("modelgate container lacks env %s, which config.yaml needs", name)
				continue
			}
			if ev.Value != "" || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil {
				t.Errorf("env %s must come from a Secret, not a literal", name)
				continue
			}
			ref := ev.ValueFrom.SecretKeyRef
			if _, ok := secret.StringData[ref.Key]; ref.Name != secret.Metadata.Name || !ok {
				t.Errorf("env %s refers to %s/%s, which the Secret does not define", name, ref.Name, ref.Key)
			}
		}
		key := envNamed(app, "OPENAI_API_KEY")
		appKey := envNamed(mg, "APP_KEY")
		if key == nil || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || appKey == nil ||
			*key.ValueFrom.SecretKeyRef != *appKey.ValueFrom.SecretKeyRef {
			t.Error("the app's OPENAI_API_KEY should be the same Secret entry modelgate knows as APP_KEY")
		}
		if base := envNamed(app, "OPENAI_BASE_URL"); base == nil || base.Value != "http://127.0.0.1:8080/v1" {
			t.Error("the app should reach modelgate at http://127.0.0.1:8080/v1")
		}
	})

	t.Run("config_mount", func(t *testing.T) {
		path := argAfter(mg.Args, "--config")
		mounted := false
		for _, vm := range mg.VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name &&
					path == strings.TrimSuffix(vm.MountPath, "/")+"/config.yaml" {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("--config %q is not the ConfigMap's config.yaml", path)
		}
		data := exampleConfig(t).Ratelimit.DataPath
		writable := false
		for _, vm := range mg.VolumeMounts {
			if strings.HasPrefix(data+"/", strings.TrimSuffix(vm.MountPath, "/")+"/") && vm.Name != "modelgate-config" {
				writable = true
			}
		}
		if !writable {
			t.Errorf("data_path %s is not on a mounted volume, but the root filesystem is read-only", data)
		}
	})

	t.Run("hardening", func(t *testing.T) {
		if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
			t.Error("the pod should run as non-root")
		}
		if !mg.SecurityContext.ReadOnlyRootFilesystem {
			t.Error("modelgate needs no writable root filesystem")
		}
		if p := mg.SecurityContext.AllowPrivilegeEscalation; p == nil || *p {
			t.Error("allowPrivilegeEscalation should be false")
		}
		grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
		if drain := exampleConfig(t).Server.DrainTimeout; grace <= drain {
			t.Errorf("terminationGracePeriodSeconds %v must exceed drain_timeout %v, or streams are killed mid-drain", grace, drain)
		}
	})
}

// composeFile holds the fields the checks read from any of the Compose files here.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		NetworkMode string            `yaml:"network_mode"`
		ReadOnly    bool              `yaml:"read_only"`
		DependsOn   dependsOn         `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		StopGracePeriod string `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// dependsOn is a service's depends_on, which Compose accepts as a list of service names or
// as a map from name to condition; a listed name has no condition.
type dependsOn map[string]dependency

type dependency struct {
	Condition string `yaml:"condition"`
}

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return n.Decode((*map[string]dependency)(d))
	}
	var names []string
	if err := n.Decode(&names); err != nil {
		return err
	}
	*d = make(dependsOn, len(names))
	for _, name := range names {
		(*d)[name] = dependency{}
	}
	return nil
}

func TestComposeSidecar(t *testing.T) {
	var cf composeFile
	if err := yaml.Unmarshal(apitest.ReadFile(t, "docker-compose.yaml"), &cf); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	mg, ok := cf.Services["modelgate"]
	if !ok {
		t.Fatal("no modelgate service")
	}
	app, ok := cf.Services["app"]
	if !ok {
		t.Fatal("no app service")
	}
	if app.NetworkMode != "service:modelgate" {
		t.Errorf("app network_mode = %q; a sidecar shares modelgate's network namespace", app.NetworkMode)
	}
	if app.DependsOn["modelgate"].Condition != "service_healthy" {
		t.Error("the app should wait for modelgate to be healthy")
	}
	if app.Environment["OPENAI_BASE_URL"] != "http://127.0.0.1:8080/v1" {
		t.Errorf("app OPENAI_BASE_URL = %q", app.Environment["OPENAI_BASE_URL"])
	}
	if app.Environment["OPENAI_API_KEY"] == "" || !strings.Contains(app.Environment["OPENAI_API_KEY"], "${APP_KEY") {
		t.Error("the app's key should be the APP_KEY modelgate is given")
	}
	for _, name := range configVars(t) {
		v := mg.Environment[name]
		if !strings.HasPrefix(v, "${"+name) {
			t.Errorf("modelgate env %s = %q; it should be taken from the host environment or .env", name, v)
		}
	}
	cfgPath := argAfter(mg.Command, "--config")
	if !hasVolume(mg.Volumes, "./config.yaml", cfgPath) {
		t.Errorf("--config %q is not ./config.yaml mounted read-only", cfgPath)
	}
	if !mg.ReadOnly {
		t.Error("modelgate needs no writable root filesystem")
	}
	data := exampleConfig(t).Ratelimit.DataPath
	onVolume := false
	for _, v := range mg.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && cf.Volumes != nil && hasKey(cf.Volumes, parts[0]) && strings.HasPrefix(data+"/", parts[1]+"/") {
			onVolume = true
		}
	}
	if !onVolume {
		t.Errorf("data_path %s is not on a named volume", data)
	}
	if test := strings.Join(mg.Healthcheck.Test, " "); !strings.Contains(test, "/modelgate healthcheck") || !strings.Contains(test, "/readyz") {
		t.Errorf("healthcheck %q should run the binary's own probe against /readyz (the image has no shell or curl)", test)
	}
	grace, err := time.ParseDuration(mg.StopGracePeriod)
	if err != nil {
		t.Fatalf("stop_grace_period: %v", err)
	}
	if drain := exampleConfig(t).Server.DrainTimeout; grace <= drain {
		t.Errorf("stop_grace_period %v must exceed drain_timeout %v", grace, drain)
	}
}

func TestDockerfileImage(t *testing.T) {
	df := string(apitest.ReadFile(t, "../Dockerfile"))
	var final []string
	for _, line := range strings.Split(df, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			final = append(final, line)
		}
	}
	if len(final) == 0 || !strings.Contains(final[0], "distroless") || !strings.Contains(final[0], "nonroot") {
		t.Fatalf("final stage should be a distroless nonroot image, got %q", first(final))
	}
	want := map[string]bool{"USER nonroot": false, `ENTRYPOINT ["/modelgate"`: false, "0.0.0.0:8080": false, "CGO_ENABLED=0": strings.Contains(df, "CGO_ENABLED=0")}
	for _, line := range final {
		for w := range want {
			if strings.Contains(line, w) {
				want[w] = true
			}
		}
	}
	for w, ok := range want {
		if !ok {
			t.Errorf("Dockerfile lacks %q", w)
		}
	}
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func hasVolume(vols []string, src, dst string) bool {
	for _, v := range vols {
		if v == src+":"+dst+":ro" {
			return true
		}
	}
	return false
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func keys(m map[string]manifest) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// The local tracing example: modelgate exports to the Jaeger service of the same file, and
// the UI is published on loopback only.
func TestTracingCompose(t *testing.T) {
	var cf composeFile
	if err := yaml.Unmarshal(apitest.ReadFile(t, "tracing/docker-compose.yaml"), &cf); err != nil {
		t.Fatalf("tracing/docker-compose.yaml: %v", err)
	}
	jaeger, ok := cf.Services["jaeger"]
	if !ok || !strings.HasPrefix(jaeger.Image, "jaegertracing/jaeger:2.") {
		t.Fatalf("want a jaeger service on a pinned Jaeger 2 image, got %q", jaeger.Image)
	}
	mg, ok := cf.Services["modelgate"]
	if !ok {
		t.Fatal("no modelgate service")
	}
	if got := mg.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "http://jaeger:4318" {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %q, want Jaeger's OTLP/HTTP port http://jaeger:4318", got)
	}
	_, dependsOnJaeger := mg.DependsOn["jaeger"]
	if mg.Environment["OTEL_SERVICE_NAME"] == "" || !dependsOnJaeger {
		t.Error("modelgate should name its service and start after jaeger")
	}
	if !slices.Contains(mg.Command, "--simulate") {
		t.Error("the example runs on the simulated platform, so it needs no keys")
	}
	for name, s := range map[string][]string{"jaeger": jaeger.Ports, "modelgate": mg.Ports} {
		for _, p := range s {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q beyond loopback", name, p)
			}
		}
	}
}
