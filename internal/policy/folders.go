package policy

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// keyPlaceholder stands for the key's name in a workspace folder.
const keyPlaceholder = "{key}"

// folders expands every key's workspace folder (its own entry's, else the
// default's) and checks them: each must be a plain relative path inside
// the workspace, and no key's folder may hold another key's, since the
// outer key would then see the inner one's files. Two keys may share one
// folder on purpose. "." is the whole workspace, which holds every folder:
// a key given it is trusted with all of them, as a key without a folder
// is.
func (c *compiler) folders(def entryFile, keys map[string]entryFile) map[string]string {
	out := map[string]string{}
	at := map[string]string{}    // where each key's folder was written
	refused := map[string]bool{} // where a folder was refused, said once
	for _, k := range c.names.Keys {
		tmpl, where := def.Workspace, "default.workspace"
		if e, ok := keys[k]; ok && e.Workspace != nil {
			tmpl, where = e.Workspace, "keys."+k+".workspace"
		}
		if tmpl == nil {
			continue
		}
		if c.names.NoFolders != "" && *tmpl != "." {
			if !refused[where] {
				c.fail(where, "a key cannot have a folder of its own here: %s", c.names.NoFolders)
			}
			refused[where] = true
			continue
		}
		dir, err := expandFolder(*tmpl, k)
		if err != "" {
			c.fail(where, "%s", err)
			continue
		}
		if dir != "." {
			out[k], at[k] = dir, where
		}
	}
	names := make([]string, 0, len(out))
	for k := range out {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, a := range names {
		for _, b := range names {
			if out[a] != out[b] && strings.HasPrefix(out[b], out[a]+"/") {
				c.fail(at[a], "key %q's folder %q holds key %q's folder %q, so %s would see %s's files; give each key a folder beside the others (such as tenants/{key})", a, out[a], b, out[b], a, b)
			}
		}
	}
	return out
}

// expandFolder puts the key's name for {key} in tmpl and checks the
// result, or says what is wrong with it.
func expandFolder(tmpl, key string) (dir, problem string) {
	if tmpl == "" {
		return "", `is empty: give a folder relative to TOOLSVC_WORKSPACE, such as "tenants/{key}", or "." for the whole workspace`
	}
	rest := strings.ReplaceAll(tmpl, keyPlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return "", fmt.Sprintf(`%q: the only placeholder is {key}, the key's name`, tmpl)
	}
	if strings.ContainsRune(tmpl, '\\') {
		return "", fmt.Sprintf(`%q: separate folders with "/"`, tmpl)
	}
	dir = strings.ReplaceAll(tmpl, keyPlaceholder, key)
	if path.IsAbs(dir) || !filepath.IsLocal(filepath.FromSlash(dir)) {
		return "", fmt.Sprintf(`%q gives %q for key %q, which is not a folder inside TOOLSVC_WORKSPACE: give a relative path without "..", such as "tenants/{key}"`, tmpl, dir, key)
	}
	return path.Clean(dir), ""
}

// Folder returns the key's own folder, relative to the workspace and
// slash-separated; "" when it works in the whole workspace.
func (p *Policy) Folder(key string) string { return p.folders[key] }
