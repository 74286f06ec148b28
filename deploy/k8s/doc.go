// Package k8s holds no code: it is the module of the test that builds the
// Kustomize base and overlays here and decodes every manifest strictly
// into the Kubernetes API types. It is a module of its own so that the
// service's go.mod does not carry the Kubernetes libraries.
package k8s
