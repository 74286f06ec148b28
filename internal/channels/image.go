package channels

import (
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/bmp"
	"golang.org/x/image/webp"
)

// decoders read the header of each image type send_media takes. They are
// called by extension rather than through image.DecodeConfig's registry,
// so nothing depends on which packages happen to be imported.
var decoders = map[string]func(io.Reader) (image.Config, error){
	"png": png.DecodeConfig, "jpg": jpeg.DecodeConfig, "jpeg": jpeg.DecodeConfig,
	"gif": gif.DecodeConfig, "webp": webp.DecodeConfig, "bmp": bmp.DecodeConfig,
}

// imageSize reads an image's width and height from its header, without
// decoding the pixels; an error means the file is no image of its type.
func imageSize(f *File) (w, h int, err error) {
	dec, ok := decoders[f.Ext]
	if !ok {
		return 0, 0, errors.New("not an image")
	}
	c, err := dec(f.reader())
	if err != nil {
		return 0, 0, err
	}
	return c.Width, c.Height, nil
}
