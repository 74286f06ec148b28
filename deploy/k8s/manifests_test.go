package k8s

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	checkLevel(t, "Deployment toolsvc", &d.Spec.Template, psapi.LevelRestricted)
	pod := d.Spec.Template.Spec
	if pod.HostUsers != nil && !*pod.HostUsers {
		t.Error("the base asks for a user namespace: that is overlays/userns")
	}
	if v := envValue(pod.Containers[0], "TOOLSVC_EXEC_SANDBOX"); v != "auto" {
		t.Errorf("the base's TOOLSVC_EXEC_SANDBOX is %q; want auto (Landlock as non-root)", v)
	}
	if ns, ok := find[*corev1.Namespace](objs, "toolsvc"); !ok || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Error("the base's namespace does not enforce the restricted Pod Security Standard")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pods get a service account token")
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root file system is writable")
	}
	if pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seccomp is not RuntimeDefault")
	}
	if sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		t.Errorf("the base unmasks /proc: %s", *sc.ProcMount)
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
	checkLevel(t, "StatefulSet postgres", &ss.Spec.Template, psapi.LevelRestricted)
	if _, ok := find[*corev1.Service](objs, "postgres"); !ok {
		t.Error("no Service postgres")
	}
	// The base's network policy lets toolsvc's pods reach port 5432 of
	// labelled pods only: the overlay's PostgreSQL must carry the label.
	toolsvc, ok := find[*networkingv1.NetworkPolicy](objs, "toolsvc")
	if !ok {
		t.Fatal("no NetworkPolicy toolsvc")
	}
	reached := false
	for _, rule := range toolsvc.Spec.Egress {
		if opensPort(rule, 5432) && selectsPod(t, rule.To, ss.Spec.Template.Labels, map[string]string{"kubernetes.io/metadata.name": "toolsvc"}) {
			reached = true
		}
	}
	if !reached {
		t.Errorf("toolsvc's network policy does not let its pods reach the overlay's PostgreSQL (pod labels %v)", ss.Spec.Template.Labels)
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

// checkLevel evaluates a pod template against a Pod Security Standard
// level, at the latest version, with the admission controller's own
// checks.
func checkLevel(t *testing.T, what string, tpl *corev1.PodTemplateSpec, level psapi.Level) {
	t.Helper()
	if res := evaluate(t, tpl, level, psapi.LatestVersion()); !res.Allowed {
		t.Errorf("%s breaks the %s Pod Security Standard: %s", what, level, res.ForbiddenDetail())
	}
}

func evaluate(t *testing.T, tpl *corev1.PodTemplateSpec, level psapi.Level, version psapi.Version) policy.AggregateCheckResult {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return policy.AggregateCheckResults(e.EvaluatePod(psapi.LevelVersion{Level: level, Version: version}, &tpl.ObjectMeta, &tpl.Spec))
}

// TestEgressNamesDestinations: in the base and every overlay, each egress
// rule of each network policy but DNS's says where it leads, narrowly: a
// rule with ports alone, an empty selector or 0.0.0.0/0 would open its
// ports to every address.
func TestEgressNamesDestinations(t *testing.T) {
	dirs := []string{"."}
	overlays, err := os.ReadDir("overlays")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range overlays {
		if o.IsDir() {
			dirs = append(dirs, filepath.Join("overlays", o.Name()))
		}
	}
	if len(dirs) < 3 {
		t.Errorf("overlays %v; want try and userns at least", dirs[1:])
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			for _, o := range build(t, dir) {
				np, ok := o.(*networkingv1.NetworkPolicy)
				if !ok {
					continue
				}
				for i, rule := range np.Spec.Egress {
					if isDNS(rule) {
						continue
					}
					if len(rule.To) == 0 {
						t.Errorf("NetworkPolicy %s: egress rule %d (ports %s) has no to: it leads anywhere", np.Name, i, portList(rule))
					}
					for _, peer := range rule.To {
						if why := broadPeer(peer); why != "" {
							t.Errorf("NetworkPolicy %s: egress rule %d (ports %s): %s", np.Name, i, portList(rule), why)
						}
					}
				}
			}
		})
	}
}

// isDNS reports whether rule opens port 53 alone.
func isDNS(rule networkingv1.NetworkPolicyEgressRule) bool {
	if len(rule.Ports) == 0 {
		return false
	}
	for _, p := range rule.Ports {
		if p.Port == nil || p.Port.IntValue() != 53 || p.EndPort != nil {
			return false
		}
	}
	return true
}

// broadPeer says why peer reaches everything, or everything in the
// cluster, or "" when it names its destination.
func broadPeer(peer networkingv1.NetworkPolicyPeer) string {
	if peer.IPBlock != nil {
		if strings.HasSuffix(peer.IPBlock.CIDR, "/0") {
			return "ipBlock " + peer.IPBlock.CIDR + " is every address"
		}
		return ""
	}
	if peer.PodSelector != nil && !emptySelector(peer.PodSelector) {
		return ""
	}
	if peer.PodSelector == nil && peer.NamespaceSelector != nil && !emptySelector(peer.NamespaceSelector) {
		return ""
	}
	return "a peer that selects every pod of a namespace or of the cluster"
}

func emptySelector(s *metav1.LabelSelector) bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

func opensPort(rule networkingv1.NetworkPolicyEgressRule, port int) bool {
	for _, p := range rule.Ports {
		if p.Port != nil && p.Port.IntValue() == port {
			return true
		}
	}
	return false
}

func portList(rule networkingv1.NetworkPolicyEgressRule) string {
	var s []string
	for _, p := range rule.Ports {
		s = append(s, p.Port.String())
	}
	return strings.Join(s, ",")
}

// selectsPod reports whether one of the peers selects a pod with the
// labels podLabels in a namespace with the labels nsLabels. A peer with a
// pod selector alone selects in the policy's own namespace, which is the
// toolsvc namespace here.
func selectsPod(t *testing.T, peers []networkingv1.NetworkPolicyPeer, podLabels, nsLabels map[string]string) bool {
	t.Helper()
	matches := func(s *metav1.LabelSelector, l map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel.Matches(labels.Set(l))
	}
	for _, p := range peers {
		if p.PodSelector == nil {
			continue
		}
		if (p.NamespaceSelector == nil || matches(p.NamespaceSelector, nsLabels)) && matches(p.PodSelector, podLabels) {
			return true
		}
	}
	return false
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestUsernsOverlay checks the overlay in which exec runs under
// bubblewrap: the pods are in a user namespace of their own and have what
// bubblewrap needs there (a seccomp profile that lets it make namespaces
// and mounts, an unmasked /proc, an AppArmor profile that allows mounts,
// the profiles shipped beside the manifests), and nothing else beyond the
// base: still user 10001, no capability, no privilege escalation. They
// meet the baseline Pod Security Standard, which the namespace enforces,
// and break the restricted one on the unmasked /proc alone.
func TestUsernsOverlay(t *testing.T) {
	objs := build(t, "overlays/userns")
	if len(objs) != len(build(t, "base")) {
		t.Error("overlays/userns adds or drops resources of the base")
	}
	d, ok := find[*appsv1.Deployment](objs, "toolsvc")
	if !ok {
		t.Fatal("no Deployment toolsvc")
	}
	tpl := &d.Spec.Template
	pod := tpl.Spec
	if pod.HostUsers == nil || *pod.HostUsers {
		t.Error("the pods are not in a user namespace of their own (hostUsers: false)")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("the service does not run as a user other than root: %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if v := envValue(c, "TOOLSVC_EXEC_SANDBOX"); v != "bwrap" {
		t.Errorf("TOOLSVC_EXEC_SANDBOX is %q; want bwrap, so that a pod without what bubblewrap needs stops instead of falling back to Landlock", v)
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("no container securityContext")
	}
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		t.Error("procMount is not Unmasked: bubblewrap cannot mount a /proc for the command's PID namespace over a masked one")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities %+v; want every one dropped and none added", sc.Capabilities)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("privilege escalation is allowed")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("the container is privileged")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root file system is writable")
	}

	// The seccomp profile, at pod and container level, is the one shipped
	// here, and lets bubblewrap's calls through.
	var seccompName string
	for what, p := range map[string]*corev1.SeccompProfile{"pod": psc.SeccompProfile, "container": sc.SeccompProfile} {
		if p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil {
			t.Fatalf("the %s's seccomp profile is not a Localhost one: %+v", what, p)
		}
		if seccompName != "" && *p.LocalhostProfile != seccompName {
			t.Errorf("the pod and the container name different seccomp profiles")
		}
		seccompName = *p.LocalhostProfile
	}
	checkSeccompProfile(t, filepath.Join("overlays/userns", seccompName))

	aa := psc.AppArmorProfile
	if aa == nil || aa.Type != corev1.AppArmorProfileTypeLocalhost || aa.LocalhostProfile == nil {
		t.Fatalf("the pod's AppArmor profile is not a Localhost one: %+v", aa)
	}
	if sc.AppArmorProfile != nil {
		t.Errorf("the container overrides the pod's AppArmor profile: %+v", sc.AppArmorProfile)
	}
	checkAppArmorProfile(t, "overlays/userns/toolsvc-bwrap.apparmor", *aa.LocalhostProfile)

	// Pod Security: baseline, as the namespace enforces, from the version
	// that admits an unmasked /proc in a user namespace; restricted
	// forbids that, and nothing else.
	checkLevel(t, "Deployment toolsvc", tpl, psapi.LevelBaseline)
	ns, ok := find[*corev1.Namespace](objs, "toolsvc")
	if !ok || ns.Labels["pod-security.kubernetes.io/enforce"] != string(psapi.LevelBaseline) {
		t.Errorf("the namespace does not enforce baseline: %v", ns.Labels)
	}
	if res := evaluate(t, tpl, psapi.LevelBaseline, psapi.MajorMinorVersion(1, 35)); !res.Allowed {
		t.Errorf("baseline at 1.35 refuses the pods: %s", res.ForbiddenDetail())
	}
	if res := evaluate(t, tpl, psapi.LevelBaseline, psapi.MajorMinorVersion(1, 34)); res.Allowed {
		t.Error("baseline at 1.34 admits an unmasked /proc: the docs say the overlay needs 1.35")
	}
	res := evaluate(t, tpl, psapi.LevelRestricted, psapi.LatestVersion())
	if res.Allowed || !slices.Equal(res.ForbiddenReasons, []string{"procMount"}) {
		t.Errorf("restricted should refuse the unmasked /proc alone; it says %v: %s", res.ForbiddenReasons, res.ForbiddenDetail())
	}
}

// seccompProfile is the OCI form of a seccomp profile, which a
// Localhost profile is written in.
type seccompProfile struct {
	DefaultAction string   `json:"defaultAction"`
	Architectures []string `json:"architectures"`
	Syscalls      []struct {
		Names    []string          `json:"names"`
		Action   string            `json:"action"`
		Args     []json.RawMessage `json:"args"`
		ErrnoRet *uint             `json:"errnoRet"`
	} `json:"syscalls"`
}

// checkSeccompProfile: the profile refuses what it does not name, lets
// through unconditionally the calls bubblewrap makes to build a sandbox,
// and still refuses calls the runtime's default refuses that reach the
// kernel beyond the container's own namespaces.
func checkSeccompProfile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the seccomp profile the pods name is not shipped: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p seccompProfile
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("%s: default action %s; want SCMP_ACT_ERRNO (an allowlist)", path, p.DefaultAction)
	}
	for _, a := range []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"} {
		if !slices.Contains(p.Architectures, a) {
			t.Errorf("%s: no %s", path, a)
		}
	}
	allowed := map[string]bool{}   // allowed whatever the arguments
	mentioned := map[string]bool{} // allowed at least for some arguments
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			if s.Action == "SCMP_ACT_ALLOW" {
				mentioned[n] = true
				if len(s.Args) == 0 {
					allowed[n] = true
				}
			}
		}
	}
	for _, n := range []string{"clone", "unshare", "mount", "umount2", "pivot_root", "execve", "landlock_restrict_self", "seccomp", "prctl"} {
		if !allowed[n] {
			t.Errorf("%s does not let %s through", path, n)
		}
	}
	for _, n := range []string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open",
		"open_by_handle_at", "setns", "keyctl", "add_key", "reboot", "io_uring_setup", "userfaultfd", "fsopen", "open_tree", "move_mount"} {
		if mentioned[n] {
			t.Errorf("%s lets %s through", path, n)
		}
	}
}

// checkAppArmorProfile: the AppArmor profile shipped is the one the pods
// name, and allows the mounts bubblewrap makes.
func checkAppArmorProfile(t *testing.T, path, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the AppArmor profile the pods name is not shipped: %v", err)
	}
	rules := map[string]bool{}
	named := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		rules[line] = true
		if f := strings.Fields(line); len(f) > 2 && f[0] == "profile" && f[1] == name {
			named = true
		}
	}
	if !named {
		t.Errorf("%s defines no profile %s", path, name)
	}
	for _, r := range []string{"mount,", "umount,", "pivot_root,"} {
		if !rules[r] {
			t.Errorf("%s has no rule %q", path, r)
		}
	}
	for r := range rules {
		if strings.HasPrefix(r, "deny mount") || strings.HasPrefix(r, "deny pivot_root") {
			t.Errorf("%s: %s", path, r)
		}
	}
}
