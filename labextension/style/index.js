import './index.css';
import './views.css';
