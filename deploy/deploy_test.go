// Package deploy_test checks the container build and the Kubernetes manifests against the
// loom they deploy: the Dockerfile's build command builds it, the Deployment's arguments start
// a real `loom serve`, whose probes answer on the paths the manifests give and whose /metrics
// has the gauges the endpoint picker is told to read; ports, names and selectors agree across
// the objects. (Docker and a cluster do not run here; everything else does.)
package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// object is the part of a Kubernetes object the test reads.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

type deploymentSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
			Containers                    []struct {
				Image string   `json:"image"`
				Args  []string `json:"args"`
				Ports []struct {
					Name          string `json:"name"`
					ContainerPort int    `json:"containerPort"`
				} `json:"ports"`
				ReadinessProbe, LivenessProbe struct {
					HTTPGet struct {
						Path string `json:"path"`
						Port string `json:"port"`
					} `json:"httpGet"`
				}
			} `json:"containers"`
		} `json:"spec"`
	} `json:"template"`
}

type serviceSpec struct {
	Selector map[string]string `json:"selector"`
	Ports    []struct {
		Port       int    `json:"port"`
		TargetPort string `json:"targetPort"`
	} `json:"ports"`
}

type poolSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	TargetPorts []struct {
		Number int `json:"number"`
	} `json:"targetPorts"`
	EndpointPickerRef struct {
		Name string `json:"name"`
		Port struct {
			Number int `json:"number"`
		} `json:"port"`
	} `json:"endpointPickerRef"`
}

func objects(t *testing.T) map[string]object {
	t.Helper()
	src, err := os.ReadFile("loom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]object{}
	for i, doc := range strings.Split(string(src), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("loom.yaml document %d: %v", i+1, err)
		}
		out[o.Kind+"/"+o.Metadata.Name] = o
	}
	return out
}

func spec[T any](t *testing.T, objs map[string]object, key string) T {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("loom.yaml has no %s", key)
	}
	var s T
	if err := json.Unmarshal(o.Spec, &s); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return s
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestManifestsAgree checks names, ports and selectors across the objects and the Dockerfile.
func TestManifestsAgree(t *testing.T) {
	objs := objects(t)
	dep := spec[deploymentSpec](t, objs, "Deployment/loom")
	svc := spec[serviceSpec](t, objs, "Service/loom")
	pool := spec[poolSpec](t, objs, "InferencePool/loom")
	epp := spec[serviceSpec](t, objs, "Service/loom-epp")
	if objs["InferencePool/loom"].APIVersion != "inference.networking.k8s.io/v1" {
		t.Errorf("InferencePool apiVersion %q", objs["InferencePool/loom"].APIVersion)
	}
	labels := dep.Template.Metadata.Labels
	if !sameLabels(dep.Selector.MatchLabels, labels) || !sameLabels(svc.Selector, labels) || !sameLabels(pool.Selector.MatchLabels, labels) {
		t.Errorf("selectors %v, %v, %v do not select the pods labelled %v", dep.Selector.MatchLabels, svc.Selector, pool.Selector.MatchLabels, labels)
	}
	c := dep.Template.Spec.Containers[0]
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" {
		t.Fatalf("container ports %+v", c.Ports)
	}
	port := c.Ports[0].ContainerPort
	if svc.Ports[0].TargetPort != "http" || len(pool.TargetPorts) != 1 || pool.TargetPorts[0].Number != port {
		t.Errorf("service target %q, pool ports %+v, container port %d", svc.Ports[0].TargetPort, pool.TargetPorts, port)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/ready" || c.LivenessProbe.HTTPGet.Path != "/health" || c.ReadinessProbe.HTTPGet.Port != "http" {
		t.Errorf("probes %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if _, ok := objs["Deployment/loom-epp"]; !ok || pool.EndpointPickerRef.Name != "loom-epp" || epp.Ports[0].Port != pool.EndpointPickerRef.Port.Number {
		t.Errorf("endpoint picker ref %+v, its service ports %+v", pool.EndpointPickerRef, epp.Ports)
	}
	// The grace period covers the drain delay and the drain timeout.
	delay, timeout := argDuration(t, c.Args, "--drain-delay"), argDuration(t, c.Args, "--drain-timeout")
	if grace := time.Duration(dep.Template.Spec.TerminationGracePeriodSeconds) * time.Second; grace < delay+timeout {
		t.Errorf("terminationGracePeriodSeconds %v < drain delay %v + timeout %v", grace, delay, timeout)
	}
	// The image listens where the manifests say.
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), fmt.Sprintf("EXPOSE %d", port)) || !strings.Contains(string(df), fmt.Sprintf(`"--addr", "0.0.0.0:%d"`, port)) ||
		!strings.Contains(string(df), "USER nonroot") {
		t.Errorf("the Dockerfile does not expose and serve port %d as non-root", port)
	}
	if !strings.Contains(strings.Join(c.Args, " "), fmt.Sprintf("--addr 0.0.0.0:%d", port)) {
		t.Errorf("container args %v do not listen on port %d", c.Args, port)
	}
}

func argDuration(t *testing.T, args []string, flag string) time.Duration {
	t.Helper()
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			d, err := time.ParseDuration(args[i+1])
			if err != nil {
				t.Fatalf("%s %s: %v", flag, args[i+1], err)
			}
			return d
		}
	}
	t.Fatalf("args %v lack %s", args, flag)
	return 0
}

// TestImageCommandServes builds loom with the Dockerfile's build command, starts it with the
// Deployment's arguments (on a free loopback port), and checks the probes and the metrics the
// endpoint picker reads; then SIGTERM drains it.
func TestImageCommandServes(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) -o /out/loom (\./cmd/loom)$`).FindStringSubmatch(string(df))
	if build == nil {
		t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build … -o /out/loom ./cmd/loom` line")
	}
	bin := filepath.Join(t.TempDir(), "loom")
	cmd := exec.Command("sh", "-c", build[1]+" -o "+bin+" "+build[2])
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build[1], err, out)
	}

	objs := objects(t)
	c := spec[deploymentSpec](t, objs, "Deployment/loom").Template.Spec.Containers[0]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := append([]string(nil), c.Args...)
	for i := range args {
		if strings.HasPrefix(args[i], "0.0.0.0:") {
			args[i] = addr
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, args...)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(bufio.NewReader(stderr))
		logs <- string(b)
	}()
	url := "http://" + addr
	ready := false
	for i := 0; i < 300 && !ready; i++ {
		if resp, err := http.Get(url + "/ready"); err == nil {
			ready = resp.StatusCode == 200
			resp.Body.Close()
		}
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		srv.Process.Kill()
		t.Fatalf("loom %v never became ready:\n%s", args, <-logs)
	}
	if resp, err := http.Get(url + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/health: %v", err)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	eppArgs := spec[deploymentSpec](t, objs, "Deployment/loom-epp").Template.Spec.Containers[0].Args
	for _, a := range eppArgs {
		for _, flag := range []string{"--total-queued-requests-metric=", "--total-running-requests-metric=", "--kv-cache-usage-percentage-metric="} {
			if name, ok := strings.CutPrefix(a, flag); ok && !regexp.MustCompile(`(?m)^`+name+` `).Match(metrics) {
				t.Errorf("/metrics has no gauge %s", name)
			}
		}
	}
	// SIGTERM: /ready turns 503 during the drain delay, then the process exits cleanly.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if resp, err := http.Get(url + "/ready"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ready while draining: %v %v", resp, err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("loom serve exited with %v:\n%s", err, <-logs)
	}
}
