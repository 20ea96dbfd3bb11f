"""The operator's webhooks: conversion, validation and defaulting served from pure functions.

Private: the public names are re-exported by ``reconciler.webhooks``."""
