// Placeholder: the linalg tests are being written.
