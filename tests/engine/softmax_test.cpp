// Placeholder: the softmax tests are being written.
