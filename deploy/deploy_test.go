// Package deploy holds no code: its test checks the deployment files
// (compose.yaml, the Kubernetes manifests) as far as can be done without a
// Docker engine or a cluster: every file parses, every kustomization
// resolves (with `kubectl kustomize` when kubectl is on PATH), and the
// cluster mode is wired as the operator's guide says.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docs decodes every YAML document of path.
func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			out = append(out, d)
		}
	}
}

func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML under deploy/: %v", err)
	}
	return files
}

// Every file parses, and every Kubernetes object names its kind and itself.
func TestEveryFileParses(t *testing.T) {
	for _, f := range yamlFiles(t) {
		ds := docs(t, f)
		if len(ds) == 0 {
			t.Errorf("%s: no document", f)
		}
		for i, d := range ds {
			if _, k8s := d["apiVersion"]; !k8s || d["kind"] == "Kustomization" {
				continue
			}
			if str(d, "kind") == "" || str(d, "metadata", "name") == "" {
				t.Errorf("%s, document %d: no kind or metadata.name", f, i+1)
			}
		}
	}
}

// Every resource and patch a kustomization names exists; with kubectl on
// PATH, kustomize builds it.
func TestKustomizationsResolve(t *testing.T) {
	kubectl, _ := exec.LookPath("kubectl")
	for _, f := range yamlFiles(t) {
		if filepath.Base(f) != "kustomization.yaml" {
			continue
		}
		dir := filepath.Dir(f)
		k := docs(t, f)[0]
		for _, r := range list(k, "resources") {
			if _, err := os.Stat(filepath.Join(dir, r.(string))); err != nil {
				t.Errorf("%s: resource %v: %v", f, r, err)
			}
		}
		for _, p := range list(k, "patches") {
			if path := str(p.(map[string]any), "path"); path != "" {
				if _, err := os.Stat(filepath.Join(dir, path)); err != nil {
					t.Errorf("%s: patch %s: %v", f, path, err)
				}
			}
		}
		if kubectl != "" {
			if out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err != nil {
				t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, out)
			}
		}
	}
}

// objects reads every Kubernetes object of the files in dirs, by kind.
func objects(t *testing.T, dirs ...string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			for _, d := range docs(t, f) {
				out[str(d, "kind")] = append(out[str(d, "kind")], d)
			}
		}
	}
	return out
}

// The cluster overlay: the HPA scales the API Deployment, each PDB selects
// the pods of a workload, the shop is told it is on a cluster, and the
// Redis nodes keep state safely (AOF, noeviction, cluster mode) and are
// joined as 3 masters with a replica each.
func TestKubernetesClusterMode(t *testing.T) {
	objs := objects(t, "k8s", "k8s-cluster")
	workloads := map[string]map[string]any{} // name → pod template labels
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, d := range objs[kind] {
			workloads[str(d, "metadata", "name")] = get(d, "spec", "template", "metadata", "labels").(map[string]any)
		}
	}
	hpas := objs["HorizontalPodAutoscaler"]
	if len(hpas) != 1 || str(hpas[0], "spec", "scaleTargetRef", "kind") != "Deployment" ||
		workloads[str(hpas[0], "spec", "scaleTargetRef", "name")] == nil || str(hpas[0], "spec", "scaleTargetRef", "name") != "shop" {
		t.Errorf("the HPA does not scale the shop Deployment: %v", hpas)
	}
	covered := map[string]bool{}
	for _, p := range objs["PodDisruptionBudget"] {
		sel := get(p, "spec", "selector", "matchLabels").(map[string]any)
		for name, labels := range workloads {
			if matches(sel, labels) {
				covered[name] = true
			}
		}
	}
	for _, name := range []string{"shop", "shop-writer", "redis-cluster"} {
		if !covered[name] {
			t.Errorf("no PodDisruptionBudget selects the pods of %s", name)
		}
	}
	var data map[string]any
	for _, c := range objs["ConfigMap"] {
		if strings.Contains(str(c, "data", "SHOP_REDIS_URL"), "redis-cluster") {
			data = get(c, "data").(map[string]any)
		}
	}
	if data == nil || data["SHOP_REDIS_CLUSTER"] != "true" || !strings.Contains(data["SHOP_REDIS_URL"].(string), "?addr=") {
		t.Errorf("the cluster ConfigMap patch: %v", data)
	}
	var redisArgs []any
	for _, s := range objs["StatefulSet"] {
		if str(s, "metadata", "name") == "redis-cluster" {
			redisArgs = list(get(s, "spec", "template", "spec", "containers").([]any)[0].(map[string]any), "args")
		}
	}
	checkRedisArgs(t, "the redis-cluster StatefulSet", redisArgs)
	var initScript string
	for _, j := range objs["Job"] {
		if str(j, "metadata", "name") == "redis-cluster-init" {
			initScript = join(list(get(j, "spec", "template", "spec", "containers").([]any)[0].(map[string]any), "args"))
		}
	}
	if !strings.Contains(initScript, "--cluster create") || !strings.Contains(initScript, "--cluster-replicas 1") ||
		!strings.Contains(initScript, "for i in 0 1 2 3 4 5") {
		t.Errorf("the init Job does not create 3 masters with a replica each: %q", initScript)
	}
}

// The compose profile "cluster": six nodes kept as state (AOF, noeviction,
// cluster mode), an init that creates the cluster, the shop and a writer
// on it, started after the cluster is created, on a port and a database
// of their own.
func TestComposeClusterProfile(t *testing.T) {
	c := docs(t, "compose.yaml")[0]
	services := get(c, "services").(map[string]any)
	ports := map[string]string{}
	for name, s := range services {
		svc := s.(map[string]any)
		cluster := slices.Contains(list(svc, "profiles"), any("cluster"))
		for _, p := range list(svc, "ports") {
			host, _, _ := strings.Cut(p.(string), ":")
			if other, ok := ports[host]; ok {
				t.Errorf("%s and %s both publish port %s", name, other, host)
			}
			ports[host] = name
		}
		if strings.HasPrefix(name, "redis-node-") {
			if !cluster {
				t.Errorf("%s is not in the cluster profile", name)
			}
			checkRedisArgs(t, name, list(svc, "command"))
		}
	}
	for i := 1; i <= 6; i++ {
		if services["redis-node-"+string(rune('0'+i))] == nil {
			t.Errorf("no redis-node-%d", i)
		}
	}
	init := join(list(services["redis-cluster-init"].(map[string]any), "command"))
	if strings.Count(init, "redis-node-") < 6 || !strings.Contains(init, "--cluster create") || !strings.Contains(init, "--cluster-replicas 1") {
		t.Errorf("redis-cluster-init does not create the six-node cluster: %q", init)
	}
	for _, name := range []string{"shop-cluster", "writer-cluster"} {
		svc := services[name].(map[string]any)
		env := get(svc, "environment").(map[string]any)
		if env["SHOP_REDIS_CLUSTER"] != "true" || !strings.Contains(env["SHOP_REDIS_URL"].(string), "redis-node-") ||
			!strings.Contains(env["SHOP_DATABASE_URL"].(string), "/shop_cluster") {
			t.Errorf("%s is not on the cluster: %v", name, env)
		}
	}
	if str(services["shop-cluster"].(map[string]any), "depends_on", "redis-cluster-init", "condition") != "service_completed_successfully" {
		t.Error("shop-cluster does not wait for the cluster to be created")
	}
}

// checkRedisArgs: state, not cache.
func checkRedisArgs(t *testing.T, who string, args []any) {
	t.Helper()
	s := " " + join(args) + " "
	for _, want := range []string{" --cluster-enabled yes ", " --appendonly yes ", " --maxmemory-policy noeviction ", " --appendfsync always "} {
		if !strings.Contains(s, want) {
			t.Errorf("%s: no %q in %q", who, strings.TrimSpace(want), s)
		}
	}
}

func matches(sel, labels map[string]any) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func str(m map[string]any, path ...string) string { s, _ := get(m, path...).(string); return s }

func list(m map[string]any, key string) []any { l, _ := m[key].([]any); return l }

func join(l []any) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strings.TrimSpace(strings.ReplaceAll(toString(v), "\\\n", " "))
	}
	return strings.Join(strings.Fields(strings.Join(s, " ")), " ")
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}
