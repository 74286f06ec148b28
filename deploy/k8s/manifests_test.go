package k8s

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// build runs Kustomize on dir (relative to this folder) in a copy of this
// folder whose secret.env is secret.env.example with a key filled in, as
// an operator's would be, and decodes every resource it renders strictly
// into its Kubernetes API type: an unknown or misspelt field, a duplicate
// field or a kind the API does not have fails the test.
func build(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("base/secret.env.example")
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Replace(string(example), "TOOLSVC_API_KEYS=\n", "TOOLSVC_API_KEYS=agent=k8s-manifest-test-key-0123456789\n", 1)
	if secret == string(example) {
		t.Fatal("secret.env.example has no empty TOOLSVC_API_KEYS= line to fill")
	}
	if err := os.WriteFile(filepath.Join(root, "base", "secret.env"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	for _, r := range resources.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(b, nil, nil)
		if err != nil {
			t.Errorf("%s %s: %v", r.GetKind(), r.GetName(), err)
			continue
		}
		if r.GetKind() != "Namespace" && r.GetNamespace() != "toolsvc" {
			t.Errorf("%s %s is in namespace %q, not toolsvc", r.GetKind(), r.GetName(), r.GetNamespace())
		}
		objs = append(objs, obj)
	}
	return objs
}

func find[T runtime.Object](objs []runtime.Object, name string) (T, bool) {
	for _, o := range objs {
		if v, ok := o.(T); ok {
			if m, ok := any(v).(interface{ GetName() string }); ok && m.GetName() == name {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}

// TestBase checks what the base promises: three replicas under the
// restricted Pod Security Standard, probes on /healthz and /readyz, a
// pre-stop drain, no API token, the Secret behind the settings, and a
// network policy whose egress is DNS and PostgreSQL alone.
func TestBase(t *testing.T) {
	objs := build(t, ".")
	if len(build(t, "base")) != len(objs) {
		t.Error("deploy/k8s renders other resources than its base")
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "PersistentVolumeClaim", "NetworkPolicy", "Secret"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s in the base; want 1", kinds[k], k)
		}
	}

	d, ok := find[*appsv1.Deployment](objs, "toolsvc")
	if !ok {
		t.Fatal("no Deployment toolsvc")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v; want 3", d.Spec.Replicas)
	}
	checkRestricted(t, "Deployment toolsvc", &d.Spec.Template)
	pod := d.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pods get a service account token")
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root file system is writable")
	}
	if pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seccomp is not RuntimeDefault")
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz", c.StartupProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("a probe does not ask %s: %+v", want, probe)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		!slices.Equal(c.Lifecycle.PreStop.Exec.Command[:2], []string{"/usr/local/bin/toolsvc", "drain"}) {
		t.Errorf("no pre-stop drain: %+v", c.Lifecycle)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 60 {
		t.Errorf("terminationGracePeriodSeconds %v leaves the drain (50 s) and shutdown (10 s) no room", pod.TerminationGracePeriodSeconds)
	}
	secret, ok := find[*corev1.Secret](objs, secretName(objs))
	if !ok || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != secret.Name {
		t.Errorf("the container does not read the generated Secret: %+v", c.EnvFrom)
	} else {
		for _, k := range []string{"TOOLSVC_API_KEYS", "TOOLSVC_DATABASE_URL"} {
			if len(secret.Data[k]) == 0 {
				t.Errorf("the Secret has no %s", k)
			}
		}
	}

	pvc, ok := find[*corev1.PersistentVolumeClaim](objs, "toolsvc-workspace")
	if !ok || !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Error("the workspace claim is not ReadWriteMany")
	}
	if pdb, ok := find[*policyv1.PodDisruptionBudget](objs, "toolsvc"); !ok || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Error("no PodDisruptionBudget of one replica at a time")
	}

	np, ok := find[*networkingv1.NetworkPolicy](objs, "toolsvc")
	if !ok {
		t.Fatal("no NetworkPolicy toolsvc")
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Error("the NetworkPolicy does not govern egress")
	}
	var ports []int
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.IntValue())
		}
		if len(rule.Ports) == 0 {
			t.Errorf("an egress rule opens every port: %+v", rule)
		}
	}
	slices.Sort(ports)
	if !slices.Equal(slices.Compact(ports), []int{53, 5432}) {
		t.Errorf("egress ports %v; want DNS (53) and PostgreSQL (5432) alone", ports)
	}
}

// TestTryOverlay checks the overlay with its own PostgreSQL: it runs
// under the same restricted standard, only toolsvc's pods reach it, and
// the replicas are pointed at it.
func TestTryOverlay(t *testing.T) {
	objs := build(t, "overlays/try")
	ss, ok := find[*appsv1.StatefulSet](objs, "postgres")
	if !ok {
		t.Fatal("no StatefulSet postgres")
	}
	checkRestricted(t, "StatefulSet postgres", &ss.Spec.Template)
	if _, ok := find[*corev1.Service](objs, "postgres"); !ok {
		t.Error("no Service postgres")
	}
	np, ok := find[*networkingv1.NetworkPolicy](objs, "postgres")
	if !ok || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
		np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "toolsvc" {
		t.Errorf("PostgreSQL is open to more than toolsvc: %+v", np)
	}
	secret, ok := find[*corev1.Secret](objs, secretName(objs))
	if !ok || !strings.Contains(string(secret.Data["TOOLSVC_DATABASE_URL"]), "@postgres:5432/") {
		t.Errorf("the replicas are not pointed at the overlay's PostgreSQL")
	}
	if len(secret.Data["TOOLSVC_API_KEYS"]) == 0 {
		t.Error("the overlay lost the base's keys")
	}
}

// secretName is the generated name (toolsvc-<hash>) of the Secret toolsvc.
func secretName(objs []runtime.Object) string {
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok && strings.HasPrefix(s.Name, "toolsvc-") {
			return s.Name
		}
	}
	return ""
}

// checkRestricted evaluates a pod template against the restricted Pod
// Security Standard with the admission controller's own checks.
func checkRestricted(t *testing.T, what string, tpl *corev1.PodTemplateSpec) {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(e.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &tpl.ObjectMeta, &tpl.Spec))
	if !res.Allowed {
		t.Errorf("%s breaks the restricted Pod Security Standard: %s", what, res.ForbiddenDetail())
	}
}
