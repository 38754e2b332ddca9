package image

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The accounts of distroless/static's nonroot variant: a static Go binary
// needs a passwd entry for its user (os/user, some libraries' home lookups).
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	// Go's resolver reads this to order /etc/hosts before DNS.
	nsswitch = "hosts: files dns\n"
)

// BaseFiles are what the Dockerfile's distroless/static-debian12:nonroot
// base gives a static binary: the accounts, CA certificates, a
// world-writable /tmp and the users' homes.
func BaseFiles() ([]File, error) {
	if _, err := os.Stat(CACertificates); err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (on Debian: apt-get install ca-certificates)", err)
	}
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte(nsswitch)},
		{Path: CACertificates, Mode: 0o644, Source: CACertificates},
		{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
		{Path: "/root", Mode: os.ModeDir | 0o700},
		{Path: "/home/nonroot", Mode: os.ModeDir | 0o700, UID: NonRoot, GID: NonRoot},
	}, nil
}

// BaseLayer is BaseFiles as a layer.
func BaseLayer() (v1.Layer, error) {
	files, err := BaseFiles()
	if err != nil {
		return nil, err
	}
	return Layer(files)
}
