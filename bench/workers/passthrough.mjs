// The floor: forwards every request unchanged to the origin.
export default {
  fetch(request) {
    return fetch(request);
  },
};
