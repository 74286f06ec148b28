// Package pkgcache keeps the package caches of the MCP stdio servers the
// service runs, one folder per server (and per key, for a server that
// runs an instance for each key), kept between the server's starts and
// the service's restarts, so that a restart finds what npx, uvx, pip,
// pnpm dlx or bunx downloaded before instead of downloading it again.
//
// The folders lie below one root of the service's own (the data folder's
// mcp-cache), which the sandbox hides from every command: each server's
// sandbox shows its own folder and nothing else of the root (see
// sandbox.With). A cache holds code its server runs at its next start,
// so a folder shared by two servers, or by two keys' instances of one,
// would let one plant a package that the other runs: there is none.
//
//	<root>/                      the service's, 0700 (0711 with an exec user)
//	<root>/<server>/             the service's: a server's folders, and its markers
//	<root>/<server>/server/      the server's own cache (a per_key server's listing instance's)
//	<root>/<server>/key-<key>/   the cache of a per_key server's instance for a key
//
// Server and key names are written with every byte outside [A-Za-z0-9_-]
// as %XX, so that no name can climb out ("..") or reach a sibling.
//
// A folder stays when its server leaves the tools file, so that an entry
// of the same name later finds what it downloaded; a server renamed
// starts with an empty one. Nothing bounds their size: deleting a
// server's folder reclaims it, and the folder is made again, empty, at
// the server's next start.
package pkgcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/countbot/toolsvc/internal/homedir"
)

// Caches makes the cache folders below one root. It holds no state of
// its own beyond its settings: the folders are on the disk, and every
// call finds (or makes) them again. It is safe for concurrent use.
type Caches struct {
	root  string
	owner *homedir.User
}

// New returns the caches kept below root, an absolute path, made when a
// server first needs one. owner, when set, is the account the servers
// run as (TOOLSVC_EXEC_USER), which owns each cache; the folders above
// root must then let it through, or no server could reach its cache:
// the error says which one does not.
func New(root string, owner *homedir.User) (*Caches, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("package caches: %q is not an absolute path", root)
	}
	if owner != nil {
		if err := traversable(filepath.Dir(root), owner); err != nil {
			return nil, err
		}
	}
	return &Caches{root: filepath.Clean(root), owner: owner}, nil
}

// Root returns the folder below which the caches are kept.
func (c *Caches) Root() string { return c.root }

// Server prepares and returns the cache of the server name: a shared
// server's, or the listing instance's of a per_key server.
func (c *Caches) Server(name string) (*Folder, error) { return c.folder(name, "server") }

// Key prepares and returns the cache of the per_key server name's
// instance for the key named key ("" for the one instance of a service
// without keys).
func (c *Caches) Key(name, key string) (*Folder, error) { return c.folder(name, "key-"+escape(key)) }

// folder prepares <root>/<server>/<instance>: each folder made if it is
// missing, and refused if it is a symbolic link, belongs to someone
// else or is writable by others (see homedir.Prepare); the cache belongs
// to the owner, the folders above it to the service.
func (c *Caches) folder(server, instance string) (*Folder, error) {
	if server == "" {
		return nil, errors.New("package cache: no server name")
	}
	dir := filepath.Join(c.root, escape(server))
	for _, d := range []string{c.root, dir} {
		if err := c.prepareOwn(d); err != nil {
			return nil, err
		}
	}
	cache, err := homedir.Prepare(filepath.Join(dir, instance), c.owner)
	if err != nil {
		return nil, fmt.Errorf("package cache of MCP server %s: %w", server, err)
	}
	return &Folder{Dir: cache, marker: filepath.Join(filepath.Dir(cache), instance+".starting")}, nil
}

// prepareOwn prepares a folder of the service's above the caches: mode
// 0700, or 0711 with an owner, whom it must let through (not list).
func (c *Caches) prepareOwn(dir string) error {
	got, err := homedir.Prepare(dir, nil)
	if err == nil && c.owner != nil {
		err = os.Chmod(got, 0o711)
	}
	if err != nil {
		return fmt.Errorf("package caches: %w", err)
	}
	return nil
}

// escape writes name with every byte outside [A-Za-z0-9_-] as %XX: the
// server and key names the service accepts pass unchanged, and no name
// can be "." or "..", hold a slash, or be written as another's.
func escape(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch ch := name[i]; {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_', ch == '-':
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// Folder is one server instance's cache.
type Folder struct {
	// Dir is the cache: the server's own, writable in its sandbox.
	Dir string
	// marker, in the service's folder above Dir (which no server sees),
	// is there while a start of the server runs: found at the next start,
	// it says the last one was cut short.
	marker string
}

// npxInstalls is where npx installs the packages it runs, below its
// cache (npm_config_cache): <cache>/_npx/<hash>/node_modules. npm fills
// that tree in place, without a rollback when it is killed.
const npxInstalls = "npm/_npx"

// Begin readies the cache for a start of its server. When the last start
// was cut short (the service killed a server that had not finished
// starting, or the service itself was killed meanwhile), npx may have
// been stopped in the middle of an install, leaving a package without
// its dependencies that every later npx would take for installed
// ("Cannot find package"), and its lock, which makes the next npx wait a
// minute: npx's install folder is removed, and the next npx installs
// again from the packages in npm's cache, without downloading them. The
// removal stays inside the cache whatever links the server left there.
func (f *Folder) Begin() error {
	if _, err := os.Lstat(f.marker); err == nil {
		if err := removeIn(f.Dir, npxInstalls); err != nil {
			return fmt.Errorf("package cache %s: removing an install cut short: %w. Next: delete the folder; it is made again, empty, at the next start", f.Dir, err)
		}
	}
	if err := os.WriteFile(f.marker, nil, 0o600); err != nil {
		return fmt.Errorf("package cache %s: %w", f.Dir, err)
	}
	return nil
}

// Done says the start Begin readied has ended without being cut short:
// the server answered, or its process ended on its own (a package
// manager that fails rolls its install back).
func (f *Folder) Done() { _ = os.Remove(f.marker) }

// removeIn removes rel and everything below it inside dir, following no
// symbolic link out of dir.
func removeIn(dir, rel string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.RemoveAll(rel)
}

// Env returns the variables that point the package managers at the
// cache, each one's downloads in a folder of its own below it:
//
//   - npm and npx: npm_config_cache, npm's "cache" setting, default
//     ~/.npm (https://docs.npmjs.com/cli/v11/using-npm/config#cache; any
//     npm_config_* variable sets the setting, see the same page). npx
//     installs what it runs below it, in _npx.
//   - uv and uvx: $XDG_CACHE_HOME/uv when UV_CACHE_DIR is unset
//     (https://docs.astral.sh/uv/reference/storage/#cache-directory),
//     where uvx keeps its tools' environments too.
//   - pip: $XDG_CACHE_HOME/pip when PIP_CACHE_DIR is unset
//     (https://pip.pypa.io/en/stable/topics/caching/#default-paths).
//   - pnpm and pnpm dlx: $XDG_CACHE_HOME/pnpm, its cacheDir, holding the
//     packages' metadata and the dlx installs
//     (https://pnpm.io/settings#cachedir). Its store (storeDir,
//     $XDG_DATA_HOME/pnpm/store or ~/.local/share/pnpm/store,
//     https://pnpm.io/settings#storedir) stays in HOME: a dlx install
//     older than pnpm's dlxCacheMaxAge (a day) is made again from it.
//   - bun and bunx: BUN_INSTALL_CACHE_DIR, default ~/.bun/install/cache
//     (https://bun.sh/docs/install/cache); bunx links from it into a
//     folder in $TMPDIR, which is fresh at each start.
//
// XDG_CACHE_HOME moves every other program's cache there as well, as the
// XDG base directory specification means it to
// (https://specifications.freedesktop.org/basedir-spec/latest/).
func Env(dir string) []string {
	return []string{
		"npm_config_cache=" + filepath.Join(dir, "npm"),
		"XDG_CACHE_HOME=" + dir,
		"BUN_INSTALL_CACHE_DIR=" + filepath.Join(dir, "bun"),
	}
}
