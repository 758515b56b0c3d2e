// Placeholder: the shape tests are being written.
